package server_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rmq-go/rmq/core/broker"
	"github.com/rmq-go/rmq/core/remoting"
	"github.com/rmq-go/rmq/core/store/storetest"
	"github.com/rmq-go/rmq/internal/brokertest"
	"github.com/rmq-go/rmq/internal/server"
)

// startTLS runs a broker and its embedded name server with TLS in mode,
// the test topic created; caFile, if set, requires client certificates.
func startTLS(t *testing.T, mode, caFile string) (*brokertest.Env, *x509.CertPool, string, string) {
	t.Helper()
	certFile, keyFile, pool := brokertest.WriteCert(t, t.TempDir(), "broker")
	env := brokertest.Start(t, func(c *server.Config) {
		c.TLS = server.TLSOptions{Mode: mode, CertFile: certFile, KeyFile: keyFile, CAFile: caFile}
		c.Broker.Topics = []broker.TopicOptions{{Name: aclTopic, Queues: 2}}
	})
	return env, pool, certFile, keyFile
}

// expectCleanClose sends a plain request frame to addr and expects the
// connection to end in order, with no bytes back.
func expectCleanClose(t *testing.T, addr string) {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	frame, err := remoting.AppendFrame(nil, remoting.NewRequest(remoting.GetRouteInfoByTopic, map[string]string{"topic": aclTopic}, nil))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := nc.Write(frame); err != nil {
		t.Fatal(err)
	}
	_ = nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	if n, err := io.Copy(io.Discard, nc); err != nil || n != 0 {
		t.Fatalf("plain client on the TLS-only port %s: read %d bytes, err %v; want a clean close", addr, n, err)
	}
}

func TestTLSClientCertificatesRequired(t *testing.T) {
	dir := t.TempDir()
	caFile, caKey, _ := brokertest.WriteCert(t, dir, "clients")
	env, pool, _, _ := startTLS(t, server.TLSOn, caFile)
	clientCert, err := tls.LoadX509KeyPair(caFile, caKey)
	if err != nil {
		t.Fatal(err)
	}
	route := func(cfg *tls.Config) error {
		cl := remoting.NewClient(remoting.ClientOptions{Logger: brokertest.Logger(), TLS: cfg})
		defer cl.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		resp, err := cl.Invoke(ctx, env.NamesrvAddr, remoting.NewRequest(remoting.GetRouteInfoByTopic, map[string]string{"topic": aclTopic}, nil))
		if err != nil {
			return err
		}
		if resp.Code != remoting.Success {
			return errors.New(resp.Remark)
		}
		return nil
	}
	if err := route(&tls.Config{RootCAs: pool}); err == nil {
		t.Fatal("a client without a certificate was served")
	}
	strangerCert, strangerKey, _ := brokertest.WriteCert(t, dir, "stranger")
	stranger, err := tls.LoadX509KeyPair(strangerCert, strangerKey)
	if err != nil {
		t.Fatal(err)
	}
	if err := route(&tls.Config{RootCAs: pool, Certificates: []tls.Certificate{stranger}}); err == nil {
		t.Fatal("a client with a certificate from another authority was served")
	}
	// The broker registered with its name server over mutual TLS: the
	// route is there.
	brokertest.Eventually(t, 30*time.Second, "the route of "+aclTopic, func() bool {
		return route(&tls.Config{RootCAs: pool, Certificates: []tls.Certificate{clientCert}}) == nil
	})
}

func TestTLSReload(t *testing.T) {
	env, _, certFile, keyFile := startTLS(t, server.TLSOn, "")
	peer := func() []byte {
		t.Helper()
		c, err := tls.Dial("tcp", env.BrokerAddr, &tls.Config{InsecureSkipVerify: true})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		return c.ConnectionState().PeerCertificates[0].Raw
	}
	before := peer()
	newCert, newKey, newPool := brokertest.WriteCert(t, t.TempDir(), "renewed")
	for from, to := range map[string]string{newCert: certFile, newKey: keyFile} {
		b, err := os.ReadFile(from)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(to, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := env.ReloadTLS(); err != nil {
		t.Fatal(err)
	}
	renewed := peer()
	if string(renewed) == string(before) {
		t.Fatal("the reload did not change the certificate")
	}
	// A broken file is refused and the loaded certificate stays.
	if err := os.WriteFile(certFile, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := env.ReloadTLS(); err == nil {
		t.Fatal("a broken certificate file was accepted")
	}
	if string(peer()) != string(renewed) {
		t.Fatal("a failed reload changed the certificate")
	}
	// Clients that trust only the new certificate are served, on the
	// name server's port too.
	cl := remoting.NewClient(remoting.ClientOptions{Logger: brokertest.Logger(), TLS: &tls.Config{RootCAs: newPool}})
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := cl.Invoke(ctx, env.NamesrvAddr, remoting.NewRequest(remoting.GetRouteInfoByTopic, map[string]string{"topic": aclTopic}, nil))
	if err != nil || resp.Code != remoting.Success {
		t.Fatalf("route over the renewed certificate: %v %+v", err, resp)
	}
}

func TestTLSConfig(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "broker.yaml")
	write := func(s string) {
		if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("tls:\n  mode: permissive\n  certFile: b.crt\n  keyFile: /k/b.key\n  caFile: ca.pem\n")
	var c server.Config
	if err := c.ReadFile(path); err != nil {
		t.Fatal(err)
	}
	want := server.TLSOptions{Mode: "permissive", CertFile: filepath.Join(dir, "b.crt"), KeyFile: "/k/b.key", CAFile: filepath.Join(dir, "ca.pem")}
	if c.TLS != want {
		t.Fatalf("read %+v, want %+v", c.TLS, want)
	}
	write("tls:\n  mode: on\n  certfile: b.crt\n")
	if err := new(server.Config).ReadFile(path); err == nil || !strings.Contains(err.Error(), "certfile") {
		t.Fatalf("unknown key: %v", err)
	}

	for _, tc := range []struct {
		opts server.TLSOptions
		want []string
	}{
		{server.TLSOptions{Mode: "yes"}, []string{`mode "yes"`, "disabled, permissive or enforcing"}},
		{server.TLSOptions{Mode: "on", CertFile: filepath.Join(dir, "b.crt")}, []string{"certFile is set without keyFile"}},
		{server.TLSOptions{KeyFile: filepath.Join(dir, "b.key")}, []string{"keyFile is set without certFile"}},
		{server.TLSOptions{Mode: "on", CertFile: filepath.Join(dir, "none.crt"), KeyFile: filepath.Join(dir, "none.key"), CAFile: filepath.Join(dir, "none.pem")},
			[]string{"none.crt", "caFile"}},
	} {
		_, err := server.Start(server.Config{DataDir: t.TempDir(), Listen: "127.0.0.1:0", Logger: brokertest.Logger(), TLS: tc.opts})
		if err == nil {
			t.Fatalf("%+v: started", tc.opts)
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%+v: error %q does not mention %q", tc.opts, err, w)
			}
		}
	}
}

// TestTLSSelfSignedKeptAndReused starts a broker with no TLS settings: it
// serves TLS and plain on its port and its name server's, presenting a
// self-signed certificate it generated in the data directory (key 0600)
// with its fingerprint logged; after a restart it presents the same one,
// read back rather than generated again.
func TestTLSSelfSignedKeptAndReused(t *testing.T) {
	var logs storetest.LogBuffer
	env := brokertest.Start(t, func(c *server.Config) {
		c.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
		c.Broker.Topics = []broker.TopicOptions{{Name: aclTopic, Queues: 2}}
	})
	certFile := filepath.Join(env.Config.DataDir, "tls", "selfsigned.crt")
	keyFile := filepath.Join(env.Config.DataDir, "tls", "selfsigned.key")
	first, err := os.ReadFile(certFile)
	if err != nil {
		t.Fatalf("no certificate kept: %v", err)
	}
	if fi, err := os.Stat(keyFile); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("key %s: %v, mode %v; want 0600", keyFile, err, fi.Mode())
	}
	fp := certFingerprint(t, first)
	if !strings.Contains(logs.String(), "generated a self-signed certificate") || !strings.Contains(logs.String(), "sha256="+fp) {
		t.Fatalf("the generation and fingerprint %s are not logged:\n%s", fp, logs.String())
	}

	// TLS that verifies: the certificate is trusted as it was written and
	// names 127.0.0.1; plain goes on beside it. (The broker's port answers
	// a route lookup, a name server's code, with REQUEST_CODE_NOT_SUPPORTED:
	// an answer all the same.)
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(first)
	route := func(addr string, cfg *tls.Config) {
		t.Helper()
		cl := remoting.NewClient(remoting.ClientOptions{Logger: brokertest.Logger(), TLS: cfg})
		defer cl.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		resp, err := cl.Invoke(ctx, addr, remoting.NewRequest(remoting.GetRouteInfoByTopic, map[string]string{"topic": aclTopic}, nil))
		if err != nil || (addr == env.NamesrvAddr && resp.Code != remoting.Success) {
			t.Fatalf("route at %s (tls %v): %v %+v", addr, cfg != nil, err, resp)
		}
	}
	for _, addr := range []string{env.BrokerAddr, env.NamesrvAddr} {
		route(addr, &tls.Config{RootCAs: pool, ServerName: "127.0.0.1"})
		route(addr, nil)
	}

	mark := len(logs.String())
	env = env.Restart(t)
	again, err := os.ReadFile(certFile)
	if err != nil || !bytes.Equal(again, first) {
		t.Fatalf("after a restart the kept certificate changed (err %v)", err)
	}
	if l := logs.String()[mark:]; strings.Contains(l, "generated") || !strings.Contains(l, "using the self-signed certificate") || !strings.Contains(l, "sha256="+fp) {
		t.Fatalf("the restart did not log reusing %s:\n%s", fp, l)
	}
	route(env.BrokerAddr, &tls.Config{RootCAs: pool, ServerName: "127.0.0.1"})
}

// certFingerprint is the SHA-256 of a PEM certificate, as openssl prints it.
func certFingerprint(t *testing.T, certPEM []byte) string {
	t.Helper()
	block, _ := pem.Decode(certPEM)
	if block == nil {
		t.Fatal("no PEM certificate")
	}
	sum := sha256.Sum256(block.Bytes)
	parts := make([]string, len(sum))
	for i, b := range sum {
		parts[i] = fmt.Sprintf("%02X", b)
	}
	return strings.Join(parts, ":")
}

// TestTLSModeAliases keeps configs written with the earlier mode names
// working: off is disabled (no certificate generated), on is enforcing;
// no mode is permissive.
func TestTLSModeAliases(t *testing.T) {
	for mode, want := range map[string]string{"": server.TLSPermissive, "off": server.TLSDisabled, "on": server.TLSEnforcing, "disabled": server.TLSDisabled} {
		env := brokertest.Start(t, func(c *server.Config) { c.TLS.Mode = mode })
		if got := env.TLSMode(); got != want {
			t.Errorf("mode %q runs as %q, want %q", mode, got, want)
		}
		_, err := os.Stat(filepath.Join(env.Config.DataDir, "tls"))
		if generated := err == nil; generated != (want != server.TLSDisabled) {
			t.Errorf("mode %q: certificate generated %v", mode, generated)
		}
		env.Stop(t)
	}
}
