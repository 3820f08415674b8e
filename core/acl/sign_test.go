package acl_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha1"
	"encoding/base64"
	"encoding/json"
	"net"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
	"github.com/apache/rocketmq-client-go/v2/rlog"

	"github.com/rmq-go/rmq/core/acl"
	"github.com/rmq-go/rmq/core/remoting"
)

// TestSignatureVector checks the HMAC and encoding against the official Go
// client's own vector (internal/remote/interceptor_test.go,
// Test_CalculateSignature): with no extFields the content is the body.
func TestSignatureVector(t *testing.T) {
	req := remoting.NewRequest(remoting.SendMessageV2, nil, []byte("Hello RocketMQ Client ACL Feature"))
	if got, want := acl.Signature(req, "adiaushdiaushd"), "tAb/54Rwwcq+pbH8Loi7FWX4QSQ="; got != want {
		t.Fatalf("Signature = %q, want the client's %q", got, want)
	}
}

// goClientSign is the official Go client's ACLInterceptor
// (rocketmq-client-go/v2 internal/remote/interceptor.go), reproduced
// step for step because the package is internal: the AccessKey value and
// the extFields values in sorted key order, then the body; SecurityToken is
// put in the map but not in the key list, so it is not signed.
func goClientSign(cmd *remoting.Command, ak, sk, token string) {
	m := map[string]string{"AccessKey": ak}
	order := []string{"AccessKey"}
	if token != "" {
		m["SecurityToken"] = token
	}
	for k, v := range cmd.ExtFields {
		m[k] = v
		order = append(order, k)
	}
	sort.Slice(order, func(i, j int) bool { return strings.Compare(order[i], order[j]) < 0 })
	content := ""
	for _, k := range order {
		content += m[k]
	}
	mac := hmac.New(sha1.New, []byte(sk))
	mac.Write([]byte(content))
	mac.Write(cmd.Body)
	cmd.Set("Signature", base64.StdEncoding.EncodeToString(mac.Sum(nil)))
	cmd.Set("AccessKey", ak)
	if token != "" {
		cmd.Set("SecurityToken", token)
	}
}

func TestVerifyGoClientForm(t *testing.T) {
	for _, token := range []string{"", "tok"} {
		h := remoting.SendHeader{ProducerGroup: "pg", Topic: "Orders", QueueID: 1, Properties: "KEYS\x01k\x02"}
		req := remoting.NewRequest(remoting.SendMessageV2, h.ExtFields(true), []byte("body"))
		goClientSign(req, "ak", "secret-1", token)
		if !acl.Verify(req, "secret-1") {
			t.Errorf("token %q: the Go client's signature does not verify", token)
		}
		if acl.Verify(req, "secret-2") {
			t.Errorf("token %q: verifies under the wrong secret", token)
		}
		// The Java form (Sign) signs the token too; both verify.
		j := remoting.NewRequest(remoting.SendMessageV2, h.ExtFields(true), []byte("body"))
		acl.Sign(j, "ak", "secret-1", token)
		if !acl.Verify(j, "secret-1") || acl.Verify(j, "secret-2") {
			t.Errorf("token %q: Sign/Verify disagree", token)
		}
		if token == "" && j.Get("Signature") != req.Get("Signature") {
			t.Errorf("without a token the Java and Go forms differ: %q vs %q", j.Get("Signature"), req.Get("Signature"))
		}
	}
}

func TestVerifyRefuses(t *testing.T) {
	base := func() *remoting.Command {
		req := remoting.NewRequest(remoting.PullMessage, map[string]string{"topic": "Orders", "consumerGroup": "g"}, []byte("b"))
		acl.Sign(req, "ak", "s3cret", "")
		return req
	}
	for name, mutate := range map[string]func(*remoting.Command){
		"none":          func(*remoting.Command) {},
		"field changed": func(r *remoting.Command) { r.Set("topic", "Audit") },
		"field added":   func(r *remoting.Command) { r.Set("queueId", "1") },
		"field dropped": func(r *remoting.Command) { delete(r.ExtFields, "consumerGroup") },
		"body changed":  func(r *remoting.Command) { r.Body = []byte("c") },
		"key changed":   func(r *remoting.Command) { r.Set("AccessKey", "other") },
		"no signature":  func(r *remoting.Command) { delete(r.ExtFields, "Signature") },
		"truncated":     func(r *remoting.Command) { r.Set("Signature", r.Get("Signature")[:20]) },
		"not base64":    func(r *remoting.Command) { r.Set("Signature", "!!!!"+r.Get("Signature")[4:]) },
		"long":          func(r *remoting.Command) { r.Set("Signature", strings.Repeat("A", 1<<20)) },
		"moved value": func(r *remoting.Command) {
			// Values are concatenated without separators, so RocketMQ's
			// signature cannot tell "ab"+"c" from "a"+"bc"; this test pins
			// that it is the same content, as on a Java broker.
			r.Set("topic", "Order")
			r.Set("consumerGroup", "g")
		},
	} {
		req := base()
		mutate(req)
		want := name == "none"
		if got := acl.Verify(req, "s3cret"); got != want {
			t.Errorf("%s: Verify = %v, want %v", name, got, want)
		}
	}
	if acl.Verify(base(), "") {
		t.Error("an empty secret verifies")
	}
}

func TestUniqueKeyQueryIgnored(t *testing.T) {
	req := remoting.NewRequest(remoting.QueryMessage, map[string]string{"topic": "T", "key": "k"}, nil)
	acl.Sign(req, "ak", "s", "")
	req.Set("_UNIQUE_KEY_QUERY", "true") // added after signing by old Java clients
	if !acl.Verify(req, "s") {
		t.Fatal("_UNIQUE_KEY_QUERY added after signing breaks the signature; RocketMQ's broker ignores it")
	}
}

// TestOfficialClientSignatures runs the official Go producer with
// credentials against a fake name server and broker and verifies every
// request it signs: the route lookup, the heartbeat (a JSON body) and the
// send (V2 header and a body), with and without a security token.
func TestOfficialClientSignatures(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the official client")
	}
	rlog.SetLogLevel("fatal")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	var mu sync.Mutex
	seen := map[int16]*remoting.Command{}
	keep := func(req *remoting.Command) {
		c := *req
		c.Body = append([]byte(nil), req.Body...)
		c.ExtFields = make(map[string]string, len(req.ExtFields))
		for k, v := range req.ExtFields {
			c.ExtFields[k] = v
		}
		mu.Lock()
		seen[req.Code] = &c
		mu.Unlock()
	}
	srv := remoting.NewServer(remoting.ServerOptions{})
	srv.Handle(remoting.GetRouteInfoByTopic, func(_ *remoting.Conn, req *remoting.Command) *remoting.Command {
		keep(req)
		body, _ := json.Marshal(remoting.TopicRouteData{
			QueueDatas:  []remoting.QueueData{{BrokerName: "b", ReadQueueNums: 1, WriteQueueNums: 1, Perm: 6}},
			BrokerDatas: []remoting.BrokerData{{Cluster: "c", BrokerName: "b", BrokerAddrs: map[int64]string{0: addr}}},
		})
		resp := remoting.NewResponse(req, remoting.Success, "")
		resp.Body = body
		return resp
	})
	srv.Handle(remoting.HeartBeat, func(_ *remoting.Conn, req *remoting.Command) *remoting.Command {
		keep(req)
		return remoting.NewResponse(req, remoting.Success, "")
	})
	send := func(_ *remoting.Conn, req *remoting.Command) *remoting.Command {
		keep(req)
		resp := remoting.NewResponse(req, remoting.Success, "")
		resp.Set("msgId", "7F00000100002A9F0000000000000000")
		resp.Set("queueId", "0")
		resp.Set("queueOffset", "0")
		return resp
	}
	srv.Handle(remoting.SendMessage, send)
	srv.Handle(remoting.SendMessageV2, send)
	go srv.Serve(ln)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
	})

	for _, token := range []string{"", "session-token"} {
		mu.Lock()
		clear(seen)
		mu.Unlock()
		creds := primitive.Credentials{AccessKey: "RocketMQ", SecretKey: "12345678", SecurityToken: token}
		p, err := producer.NewDefaultProducer(
			producer.WithNsResolver(primitive.NewPassthroughResolver([]string{addr})),
			producer.WithGroupName("acl-pg"),
			producer.WithCredentials(creds),
			producer.WithRetry(0),
		)
		if err != nil {
			t.Fatal(err)
		}
		if err := p.Start(); err != nil {
			t.Fatal(err)
		}
		msg := primitive.NewMessage("Orders", []byte("signed body"))
		msg.WithKeys([]string{"k1"})
		if _, err := p.SendSync(context.Background(), msg); err != nil {
			t.Errorf("token %q: send: %v", token, err)
		}
		// The client's first heartbeat goes out a second after Start.
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			mu.Lock()
			hb := seen[remoting.HeartBeat]
			mu.Unlock()
			if hb != nil {
				break
			}
		}
		p.Shutdown()

		mu.Lock()
		if seen[remoting.SendMessage] == nil {
			seen[remoting.SendMessage] = seen[remoting.SendMessageV2]
		}
		for _, code := range []int16{remoting.GetRouteInfoByTopic, remoting.HeartBeat, remoting.SendMessage} {
			req := seen[code]
			name := remoting.RequestCode(code).String()
			if req == nil {
				t.Errorf("token %q: the client sent no %s", token, name)
				continue
			}
			if req.Get("AccessKey") != "RocketMQ" || req.Get("SecurityToken") != token {
				t.Errorf("token %q: %s carries AccessKey %q SecurityToken %q", token, name, req.Get("AccessKey"), req.Get("SecurityToken"))
			}
			if !acl.Verify(req, "12345678") {
				t.Errorf("token %q: the official client's %s does not verify", token, name)
			}
			if acl.Verify(req, "12345679") {
				t.Errorf("token %q: %s verifies under the wrong secret", token, name)
			}
			if code == remoting.SendMessage && string(req.Body) != "signed body" {
				t.Errorf("send body %q", req.Body)
			}
		}
		mu.Unlock()
	}
}

// FuzzVerify feeds Verify arbitrary requests and signatures: it never
// panics, a request signed under a secret verifies under it and under no
// other secret, and a forged Signature text verifies only if it is the
// exact signature.
func FuzzVerify(f *testing.F) {
	f.Add("topic", "Orders", "consumerGroup", "g", []byte("body"), "secret-1", "secret-2", "tAb/54Rwwcq+pbH8Loi7FWX4QSQ=", "")
	f.Add("b", "T", "a", "pg", []byte{}, "1234567", "12345678", "", "tok")
	f.Add("Signature", "x", "AccessKey", "y", []byte("\x00\xff"), "s\x00", "s", "====", "")
	f.Fuzz(func(t *testing.T, k1, v1, k2, v2 string, body []byte, secret, other, forged, token string) {
		req := remoting.NewRequest(remoting.SendMessage, map[string]string{k1: v1, k2: v2}, body)
		forgedReq := remoting.NewRequest(remoting.SendMessage, map[string]string{k1: v1, k2: v2, "Signature": forged}, body)
		// Never panics, whatever the Signature text.
		forgedOK := acl.Verify(forgedReq, secret)

		acl.Sign(req, "ak", secret, token)
		if secret == "" {
			if acl.Verify(req, secret) || forgedOK {
				t.Fatal("an empty secret verifies")
			}
			return
		}
		if !acl.Verify(req, secret) {
			t.Fatalf("signed under %q, does not verify", secret)
		}
		// HMAC pads keys up to its 64-byte block with zeros, so secrets that
		// differ only in trailing NULs are the same key; config validation
		// refuses control characters in secrets.
		if !sameHMACKey(secret, other) && acl.Verify(req, other) {
			t.Fatalf("signed under %q, verifies under %q", secret, other)
		}
		want := acl.Signature(forgedReq, secret)
		if forgedOK && forged != want {
			t.Fatalf("forged signature %q verifies; the right one is %q", forged, want)
		}
	})
}

func sameHMACKey(a, b string) bool {
	if len(a) > 64 || len(b) > 64 {
		return a == b
	}
	return strings.TrimRight(a, "\x00") == strings.TrimRight(b, "\x00")
}
