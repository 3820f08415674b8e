package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rmq-go/rmq/internal/brokertest"
	"github.com/rmq-go/rmq/internal/server"
)

// TestAdminCallsWithACL checks that the mqadmin commands sign their
// requests to the broker and the name server with --access-key, and print
// the refusal of an unsigned one with its code.
func TestAdminCallsWithACL(t *testing.T) {
	path := filepath.Join(t.TempDir(), "broker.yaml")
	yml := "accessKey: brokerAdmin\nsecretKey: brokerAdminSecret\nacl:\n  enabled: true\n  accounts:\n    - {accessKey: brokerAdmin, secretKey: brokerAdminSecret, admin: true}\n"
	if err := os.WriteFile(path, []byte(yml), 0o644); err != nil {
		t.Fatal(err)
	}
	env := brokertest.Start(t, func(c *server.Config) {
		if err := c.ReadFile(path); err != nil {
			t.Fatal(err)
		}
		c.ACLSource = server.ACLFile(path)
	})
	admin := adminRunner(env)
	topic := brokertest.Name("T")
	if code, _, errs := admin("topics", "create", "--topic", topic); code != 1 || !strings.Contains(errs, "no AccessKey") || !strings.Contains(errs, "NO_PERMISSION (16)") {
		t.Fatalf("unsigned: %d %q", code, errs)
	}
	if code, _, errs := admin("--access-key", "brokerAdmin", "--secret-key", "wrong", "topics", "create", "--topic", topic); code != 1 || !strings.Contains(errs, "NO_PERMISSION") {
		t.Fatalf("a wrong secret: %d %q", code, errs)
	}
	signed := []string{"--access-key", "brokerAdmin", "--secret-key", "brokerAdminSecret"}
	if code, out, errs := admin(append(signed, "topics", "create", "--topic", topic, "--read-queues", "3", "--write-queues", "3")...); code != 0 || !strings.Contains(out, topic) {
		t.Fatalf("signed create: %d %q %q", code, out, errs)
	}
	t.Setenv("RMQ_SECRET_KEY", "brokerAdminSecret")
	var route []routeRow
	adminJSON(t, admin, &route, "topics", "route", "--topic", topic, "--namesrv", env.NamesrvAddr, "--access-key", "brokerAdmin")
	if len(route) != 1 || route[0].ReadQueueNums != 3 {
		t.Fatalf("signed route: %+v", route)
	}
	var rows []clusterBroker
	adminJSON(t, admin, &rows, "cluster", "list", "--namesrv", env.NamesrvAddr, "--access-key", "brokerAdmin")
	if len(rows) != 1 || rows[0].Topics == 0 || rows[0].Error != "" {
		t.Fatalf("signed cluster list: %+v", rows)
	}
}
