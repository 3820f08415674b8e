package main

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rmq-go/rmq/internal/brokertest"
	"github.com/rmq-go/rmq/internal/server"
)

// TestInsecureRefusal checks the startup policy: a non-loopback listen
// address without ACL stops the broker with a reason, --insecure and
// insecure: true allow it, and the config file's ACL is reloadable.
func TestInsecureRefusal(t *testing.T) {
	code, _, errs := runCmd("--data-dir", t.TempDir(), "--listen", "0.0.0.0:0", "--namesrv-listen", "")
	if code != 1 || !strings.Contains(errs, "non-loopback") || !strings.Contains(errs, "--insecure") {
		t.Fatalf("0.0.0.0 without ACL: exit %d, %q", code, errs)
	}
	cfg, _, code := brokerConfig([]string{"--insecure", "--listen", "0.0.0.0:0"}, io.Discard)
	if code >= 0 || !cfg.Insecure {
		t.Fatalf("--insecure: exit %d, Insecure %v", code, cfg.Insecure)
	}
	path := filepath.Join(t.TempDir(), "broker.yaml")
	yml := "insecure: true\nacl:\n  enabled: false\n  accounts:\n    - {accessKey: brokerAdmin, secretKey: brokerAdminSecret, admin: true}\n"
	if err := os.WriteFile(path, []byte(yml), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, _, code = brokerConfig([]string{"--config", path}, io.Discard)
	if code >= 0 || !cfg.Insecure || len(cfg.ACL.Accounts) != 1 || cfg.ACLSource == nil {
		t.Fatalf("insecure: true in the file: exit %d, %+v", code, cfg)
	}
	if ac, err := cfg.ACLSource(); err != nil || len(ac.Accounts) != 1 {
		t.Fatalf("ACLSource: %+v, %v", ac, err)
	}
}

// TestAdminWithACL checks that "broker admin" signs with --access-key,
// that an unsigned admin command is refused, and that plugins reload
// re-reads the ACL, keeping the running one when the new one is bad.
func TestAdminWithACL(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "broker.yaml")
	good := "accessKey: brokerAdmin\nsecretKey: brokerAdminSecret\nacl:\n  enabled: true\n  accounts:\n    - {accessKey: brokerAdmin, secretKey: brokerAdminSecret, admin: true}\n"
	if err := os.WriteFile(path, []byte(good), 0o644); err != nil {
		t.Fatal(err)
	}
	env := brokertest.Start(t, func(c *server.Config) {
		if err := c.ReadFile(path); err != nil {
			t.Fatal(err)
		}
		c.ACLSource = server.ACLFile(path)
	})
	admin := func(args ...string) (int, string, string) {
		return runCmd(append([]string{"admin", "--broker", env.BrokerAddr}, args...)...)
	}
	if code, _, errs := admin("plugins", "list"); code != 1 || !strings.Contains(errs, "no AccessKey") {
		t.Fatalf("unsigned: %d %q", code, errs)
	}
	signed := []string{"--access-key", "brokerAdmin", "--secret-key", "brokerAdminSecret"}
	if code, out, errs := admin(append(signed, "plugins", "list")...); code != 0 {
		t.Fatalf("signed: %d %q %q", code, out, errs)
	}
	if err := os.WriteFile(path, []byte(strings.Replace(good, "accounts:", "acounts:", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, errs := admin(append(signed, "plugins", "reload")...); code != 1 || !strings.Contains(errs, "acounts") {
		t.Fatalf("reload of a bad ACL: %d %q", code, errs)
	}
	if code, out, errs := admin(append(signed, "plugins", "list")...); code != 0 {
		t.Fatalf("signed, after a refused reload: %d %q %q", code, out, errs)
	}
	if !env.ACLEnabled() {
		t.Fatal("ACL off after a refused reload")
	}
}

// TestNamesrvAloneConfig checks "broker namesrv": the same refusal of a
// public bind without access control, and its config file read.
func TestNamesrvAloneConfig(t *testing.T) {
	code, _, errs := runCmd("namesrv", "--listen", "0.0.0.0:0")
	if code != 1 || !strings.Contains(errs, "non-loopback") {
		t.Fatalf("namesrv on 0.0.0.0 without ACL: exit %d, %q", code, errs)
	}
	path := filepath.Join(t.TempDir(), "ns.yaml")
	yml := "namesrvListen: 127.0.0.1:0\nremoting:\n  maxConnsPerAddr: 7\nacl:\n  enabled: true\n  accounts:\n    - {accessKey: nsAdmin, secretKey: nsAdminSecret, admin: true}\n"
	if err := os.WriteFile(path, []byte(yml), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, code := namesrvConfig([]string{"--config", path, "--broker-expiry", "45s"}, io.Discard)
	if code >= 0 || !cfg.ACL.Enabled || cfg.ACLSource == nil || cfg.Remoting.MaxConnsPerAddr != 7 ||
		cfg.NamesrvListen != "127.0.0.1:0" || cfg.EmbeddedNamesrv.BrokerExpiry.String() != "45s" {
		t.Fatalf("namesrv config: exit %d, %+v", code, cfg)
	}
	if code, _, errs := runCmd("namesrv", "--config", filepath.Join(t.TempDir(), "missing.yaml")); code != 2 || !strings.Contains(errs, "missing.yaml") {
		t.Fatalf("missing config file: exit %d, %q", code, errs)
	}
}
