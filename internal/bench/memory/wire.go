package memory

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/rmq-go/rmq/core/remoting"
)

// Wire constants of the probe.
const (
	// connsPerSource is how many connections the probe opens from one
	// loopback source address: half the broker's default
	// maxConnsPerAddr (1,000), so connections still closing from an
	// earlier stage never push a new one over it.
	connsPerSource = 500
	// pollsPerConn is how many long-polls share one connection.
	pollsPerConn = 10
	// pollSuspend is each long-poll's suspendTimeoutMillis, below the
	// broker's default maxPullSuspend (25 s) so the broker holds it for
	// as long as it asks.
	pollSuspend = 20 * time.Second
	// callTimeout bounds a dial and each request the probe waits for.
	callTimeout = 10 * time.Second
	// readBuffer is the read buffer of a probe connection; the responses
	// it reads are headers of a few hundred bytes.
	readBuffer = 1 << 10
	// pullSysFlag is a pull's sysFlag: suspend (0x2), so it may be held,
	// and subscription (0x4), since it carries its own subscription and
	// no heartbeat registers the group.
	pullSysFlag = "6"
)

// sourceAddr is the local address of the probe's i-th connection of a
// stage: 127.0.0.2 for the first connsPerSource, then 127.0.0.3, and so
// on. Linux routes all of 127.0.0.0/8 to the loopback interface.
func sourceAddr(i int) *net.TCPAddr {
	n := 2 + i/connsPerSource
	return &net.TCPAddr{IP: net.IPv4(127, 0, 0, byte(n))}
}

// probeConn is a raw connection to the broker on which the probe sends
// requests one at a time, or many it does not wait for.
type probeConn struct {
	nc     net.Conn
	br     *bufio.Reader // nil once the connection is only held
	opaque int32
}

// dial connects to addr from local (nil for any).
func dial(ctx context.Context, addr string, local *net.TCPAddr) (*probeConn, error) {
	d := net.Dialer{Timeout: callTimeout}
	if local != nil {
		d.LocalAddr = local
	}
	nc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	return &probeConn{nc: nc, br: newProbeReader(nc)}, nil
}

// newProbeReader is a probe connection's reader.
func newProbeReader(nc net.Conn) *bufio.Reader { return bufio.NewReaderSize(nc, readBuffer) }

// send writes one request without waiting for its response.
func (c *probeConn) send(code int16, ext map[string]string) error {
	return c.sendBody(code, ext, nil)
}

// sendBody is send with a body.
func (c *probeConn) sendBody(code int16, ext map[string]string, body []byte) error {
	c.opaque++
	req := remoting.NewRequest(code, ext, body)
	req.Opaque = c.opaque
	frame, err := remoting.AppendFrame(nil, req)
	if err != nil {
		return err
	}
	c.nc.SetWriteDeadline(time.Now().Add(callTimeout))
	_, err = c.nc.Write(frame)
	return err
}

// recv reads one response, waiting at most until deadline.
func (c *probeConn) recv(deadline time.Time) (*remoting.Command, error) {
	c.nc.SetReadDeadline(deadline)
	frame, err := remoting.ReadFrame(c.br, 0, nil)
	if err != nil {
		return nil, err
	}
	resp := new(remoting.Command)
	if err := remoting.DecodeFrame(frame, resp); err != nil {
		return nil, err
	}
	return resp, nil
}

// call sends a request and returns its response, an error for a code
// other than SUCCESS.
func (c *probeConn) call(code int16, ext map[string]string) (*remoting.Command, error) {
	return c.callBody(code, ext, nil)
}

// callBody is call with a body.
func (c *probeConn) callBody(code int16, ext map[string]string, body []byte) (*remoting.Command, error) {
	if err := c.sendBody(code, ext, body); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrProbe, remoting.RequestCode(code), err)
	}
	resp, err := c.recv(time.Now().Add(callTimeout))
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrProbe, remoting.RequestCode(code), err)
	}
	if resp.Code != remoting.Success {
		return nil, fmt.Errorf("%w: %s answered %s: %s", ErrProbe, remoting.RequestCode(code), remoting.ResponseCode(resp.Code), resp.Remark)
	}
	return resp, nil
}

// hold keeps the connection open with no reader: its buffer goes.
func (c *probeConn) hold() {
	c.nc.SetDeadline(time.Time{})
	c.br = nil
}

func (c *probeConn) close() { c.nc.Close() }

// createTopic creates topic with queues read and write queues.
func (c *probeConn) createTopic(topic string, queues int) error {
	q := strconv.Itoa(queues)
	_, err := c.call(remoting.UpdateAndCreateTopic, map[string]string{
		"topic": topic, "defaultTopic": remoting.AutoCreateTopicKey,
		"readQueueNums": q, "writeQueueNums": q, "perm": "6",
		"topicFilterType": "SINGLE_TAG", "topicSysFlag": "0", "order": "false",
	})
	return err
}

// maxOffset returns the max offset of one queue.
func (c *probeConn) maxOffset(topic string, queue int) (int64, error) {
	resp, err := c.call(remoting.GetMaxOffset, map[string]string{"topic": topic, "queueId": strconv.Itoa(queue)})
	if err != nil {
		return 0, err
	}
	off, err := resp.Int64("offset")
	if err != nil {
		return 0, fmt.Errorf("%w: GET_MAX_OFFSET: %v", ErrProbe, err)
	}
	return off, nil
}

// pullHeader is a long-poll of one queue at offset: held until a message
// arrives or pollSuspend has passed.
func pullHeader(group, topic string, queue int, offset int64) map[string]string {
	return map[string]string{
		"consumerGroup":        group,
		"topic":                topic,
		"queueId":              strconv.Itoa(queue),
		"queueOffset":          strconv.FormatInt(offset, 10),
		"maxMsgNums":           "32",
		"sysFlag":              pullSysFlag,
		"commitOffset":         "0",
		"suspendTimeoutMillis": strconv.FormatInt(pollSuspend.Milliseconds(), 10),
		"subscription":         "*",
		"subVersion":           "0",
		"expressionType":       "TAG",
	}
}
