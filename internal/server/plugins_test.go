package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/rmq-go/rmq/plugins/wasm"
)

// TestNormalize checks the plugin list rules the server adds to package
// wasm's: groups, one default per kind, upper-cased expression types.
func TestNormalize(t *testing.T) {
	filter := func(name, typ string) Plugin {
		return Plugin{Options: wasm.Options{Name: name, Kind: wasm.KindFilter, ExpressionType: typ}}
	}
	alloc := func(name string, groups ...string) Plugin {
		return Plugin{Options: wasm.Options{Name: name, Kind: wasm.KindAllocate}, Groups: groups}
	}
	txn := func(name string, groups ...string) Plugin {
		return Plugin{Options: wasm.Options{Name: name, Kind: wasm.KindTxnCheck}, Groups: groups}
	}
	got, err := normalize([]Plugin{filter("geo", ""), filter("c", "class"), alloc("a", "g2", "g1"), alloc("d"), txn("t"), txn("u", "g1")})
	if err != nil {
		t.Fatal(err)
	}
	if got[0].ExpressionType != "GEO" || got[1].ExpressionType != "CLASS" || fmt.Sprint(got[2].Groups) != "[g1 g2]" {
		t.Fatalf("normalized %+v", got)
	}
	for _, c := range []struct {
		specs []Plugin
		want  string
	}{
		{[]Plugin{{Options: wasm.Options{Name: "f", Kind: wasm.KindFilter}, Groups: []string{"g"}}}, `plugin "f": config: wasm: invalid options: groups are for allocate and txncheck`},
		{[]Plugin{alloc("a"), alloc("b")}, `plugin "b": config: wasm: invalid options: plugin "a" is already the default allocate plugin`},
		{[]Plugin{txn("a", "g"), txn("b", "h", "g")}, `plugin "b": config: wasm: invalid options: group "g" is already served by txncheck plugin "a"`},
		{[]Plugin{txn("a", "g", "")}, `plugin "a": config: wasm: invalid options: a group name is empty`},
		{[]Plugin{{Options: wasm.Options{Name: "x", Kind: wasm.KindTransform}}}, `plugin "x": config: wasm: invalid options: a transform names the topics it sees`},
		{[]Plugin{{Options: wasm.Options{Name: "x", Kind: wasm.KindTransform}, Topics: []string{"Orders", "[bad"}}}, `topic pattern "[bad" is not a name or a pattern`},
		{[]Plugin{{Options: wasm.Options{Name: "x", Kind: wasm.KindTransform}, Topics: []string{"T"}, Groups: []string{"g"}}}, `groups are for allocate and txncheck plugins; a transform names topics`},
		{[]Plugin{{Options: wasm.Options{Name: "f", Kind: wasm.KindFilter}, Topics: []string{"T"}}}, `plugin "f": config: wasm: invalid options: topics are for transform plugins`},
	} {
		_, err := normalize(c.specs)
		if err == nil || !strings.Contains(err.Error(), c.want) || !errors.Is(err, wasm.ErrOptions) {
			t.Errorf("%+v: %v, want %q", c.specs, err, c.want)
		}
	}
	// The same group may have an allocator and a transaction policy.
	if _, err := normalize([]Plugin{alloc("a", "g"), txn("t", "g")}); err != nil {
		t.Error(err)
	}
}

// TestStartRefusesBadPlugin checks that a plugin that cannot load stops
// Start, names the plugin, and leaves nothing open: the data directory
// starts again at once.
func TestStartRefusesBadPlugin(t *testing.T) {
	dir := t.TempDir()
	cfg := Config{DataDir: dir, Listen: "127.0.0.1:0", NamesrvListen: "127.0.0.1:0", Logger: quiet(),
		Plugins: []Plugin{
			{Options: wasm.Options{Name: "ok-so-far", Kind: wasm.KindFilter, Module: []byte("\x00asm\x01\x00\x00\x00")}},
			{Options: wasm.Options{Name: "broken", Kind: wasm.KindFilter, Module: []byte("not wasm")}},
		}}
	_, err := Start(cfg)
	if err == nil || !strings.Contains(err.Error(), `plugin "broken"`) || !strings.Contains(err.Error(), `plugin "ok-so-far"`) {
		t.Fatalf("Start: %v", err)
	}
	cfg.Plugins = nil
	s, err := Start(cfg)
	if err != nil {
		t.Fatalf("Start after a refused start: %v", err)
	}
	defer s.Shutdown(context.Background())

	// With no plugins the admin commands still answer.
	res, err := s.Broker.Admin().Run(context.Background(), "plugins.list", nil)
	if b, _ := json.Marshal(res); err != nil || string(b) != "[]" {
		t.Fatalf("plugins.list: %s %v", b, err)
	}
	res, err = s.Broker.Admin().Run(context.Background(), "plugins.reload", nil)
	if r, ok := res.(ReloadResult); err != nil || !ok || len(r.Added)+len(r.Reloaded)+len(r.Removed)+len(r.Unchanged) != 0 {
		t.Fatalf("plugins.reload: %+v %v", res, err)
	}
	if s.TxnPlugin("any") != nil {
		t.Fatal("a txncheck plugin without a plugin list")
	}
	for args, want := range map[string]string{
		`{"group":"g"}`:                                 "topic, clientId required",
		`{"group":"g","topic":"T","clientId":1}`:        "bad arguments",
		`{"group":"g","topik":"T"}`:                     "bad arguments",
		`{"group":"g","topic":"T","clientId":"c"}`:      "topic T does not exist",
		`{"group":"g","topic":"TBW102","clientId":"c"}`: "consumer group g has no live consumers",
	} {
		_, err := s.Broker.Admin().Run(context.Background(), "allocate", json.RawMessage(args))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("allocate %s: %v, want %q", args, err, want)
		}
	}
}

func quiet() *slog.Logger { return slog.New(slog.DiscardHandler) }
