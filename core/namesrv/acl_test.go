package namesrv_test

import (
	"context"
	"net"
	"net/netip"
	"testing"

	"github.com/rmq-go/rmq/core/acl"
	"github.com/rmq-go/rmq/core/namesrv"
	"github.com/rmq-go/rmq/core/remoting"
)

// TestAuthorizeRegistration checks that the name server asks its hook and
// that, under core/acl, only an admin account registers a broker or
// deletes a route while any account may look routes up.
func TestAuthorizeRegistration(t *testing.T) {
	cfg, err := acl.ParseConfig([]byte(`
enabled: true
accounts:
  - {accessKey: brokerAdmin, secretKey: adminSecret, admin: true}
  - {accessKey: appUser1, secretKey: appSecret1, defaultTopicPerm: PUB|SUB}
`))
	if err != nil {
		t.Fatal(err)
	}
	checker, err := acl.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	_, ns := start(t, namesrv.Options{Remoting: remoting.ServerOptions{Authorize: func(c *remoting.Conn, req *remoting.Command) *remoting.Command {
		ap, _ := netip.ParseAddrPort(c.RemoteAddr().(*net.TCPAddr).String())
		if err := checker.Check(ap.Addr(), req); err != nil {
			return remoting.NewResponse(req, remoting.NoPermission, err.Error())
		}
		return nil
	}}})
	cl := remoting.NewClient(remoting.ClientOptions{})
	t.Cleanup(func() { cl.Close() })
	invoke := func(code int16, ext map[string]string, ak, sk string) *remoting.Command {
		t.Helper()
		req := remoting.NewRequest(code, ext, []byte(`{"topicConfigSerializeWrapper":{"topicConfigTable":{"T":{"topicName":"T","readQueueNums":1,"writeQueueNums":1,"perm":6}}}}`))
		if code != remoting.RegisterBroker {
			req.Body = nil
		}
		if ak != "" {
			acl.Sign(req, ak, sk, "")
		}
		resp, err := cl.Invoke(context.Background(), ns, req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	reg := func() map[string]string {
		return map[string]string{"brokerName": "b", "brokerAddr": "127.0.0.1:1", "clusterName": "C", "brokerId": "0", "compressed": "false"}
	}
	for _, c := range []struct {
		name, ak, sk string
		want         int16
	}{
		{"unsigned", "", "", remoting.NoPermission},
		{"non-admin", "appUser1", "appSecret1", remoting.NoPermission},
		{"wrong secret", "brokerAdmin", "notTheSecret", remoting.NoPermission},
		{"admin", "brokerAdmin", "adminSecret", remoting.Success},
	} {
		if resp := invoke(remoting.RegisterBroker, reg(), c.ak, c.sk); resp.Code != c.want {
			t.Errorf("%s: REGISTER_BROKER answered %d %q, want %d", c.name, resp.Code, resp.Remark, c.want)
		}
	}
	if resp := invoke(remoting.GetRouteInfoByTopic, map[string]string{"topic": "T"}, "appUser1", "appSecret1"); resp.Code != remoting.Success {
		t.Errorf("route lookup by an account with SUB: %d %q", resp.Code, resp.Remark)
	}
	if resp := invoke(remoting.DeleteTopicInNamesrv, map[string]string{"topic": "T"}, "appUser1", "appSecret1"); resp.Code != remoting.NoPermission {
		t.Errorf("DELETE_TOPIC_IN_NAMESRV by a non-admin: %d %q", resp.Code, resp.Remark)
	}
	if resp := invoke(remoting.GetRouteInfoByTopic, map[string]string{"topic": "T"}, "appUser1", "appSecret1"); resp.Code != remoting.Success {
		t.Errorf("route gone after a refused delete: %d %q", resp.Code, resp.Remark)
	}
}
