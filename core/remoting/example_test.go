package remoting_test

import (
	"context"
	"fmt"
	"net"

	"github.com/rmq-go/rmq/core/remoting"
)

// A server answers GET_MAX_OFFSET; a client asks it.
func Example() {
	srv := remoting.NewServer(remoting.ServerOptions{})
	srv.Handle(remoting.GetMaxOffset, func(c *remoting.Conn, req *remoting.Command) *remoting.Command {
		queueID, err := req.Int32("queueId")
		if err != nil {
			return remoting.NewResponse(req, remoting.SystemError, err.Error())
		}
		resp := remoting.NewResponse(req, remoting.Success, "")
		resp.SetInt64("offset", 100+int64(queueID)) // sent as the string "103"
		return resp
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	go func() { _ = srv.Serve(ln) }()
	defer func() { _ = srv.Shutdown(context.Background()) }()

	cl := remoting.NewClient(remoting.ClientOptions{})
	defer cl.Close()
	ctx := context.Background()
	req := remoting.NewRequest(remoting.GetMaxOffset, map[string]string{"topic": "TopicTest", "queueId": "3"}, nil)
	resp, err := cl.Invoke(ctx, ln.Addr().String(), req)
	if err != nil {
		panic(err)
	}
	offset, _ := resp.Int64("offset")
	fmt.Println(remoting.ResponseCode(resp.Code), offset)

	req = remoting.NewRequest(remoting.GetMaxOffset, map[string]string{"topic": "TopicTest"}, nil)
	resp, _ = cl.Invoke(ctx, ln.Addr().String(), req)
	fmt.Println(remoting.ResponseCode(resp.Code), resp.Remark)
	// Output:
	// SUCCESS 103
	// SYSTEM_ERROR remoting: missing header field "queueId"
}
