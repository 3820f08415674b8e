package assemblyscript_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/rmq-go/rmq/core/message"
	"github.com/rmq-go/rmq/examples/wasm/internal/guestbuild"
	"github.com/rmq-go/rmq/plugins/wasm"
)

// goScaffoldFilter writes the Go filter `broker plugin new filter` writes
// (its template) into a module of its own that requires the SDK by path,
// as `broker plugin new --sdk-path` does, and builds it.
func goScaffoldFilter(t *testing.T) []byte {
	t.Helper()
	src, err := os.ReadFile("../../../cmd/broker/plugintemplates/filter/main.go.tmpl")
	if err != nil {
		t.Fatal(err)
	}
	sdk, err := filepath.Abs("../../../sdk")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	gomod := "module example.com/scaffold\n\ngo 1.24.0\n\nrequire github.com/rmq-go/rmq/sdk v0.0.0\n\nreplace github.com/rmq-go/rmq/sdk => " + sdk + "\n"
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte(gomod), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "main.go"), src, 0o644); err != nil {
		t.Fatal(err)
	}
	return guestbuild.Module(t, dir)
}

// TestPropFilterLikeGoScaffold runs the same property expressions on the
// same messages through the AssemblyScript propfilter and the Go filter
// `broker plugin new` writes (whose expressions propfilter's property
// clauses share), both through the host, and holds both to one table.
func TestPropFilterLikeGoScaffold(t *testing.T) {
	as := guestbuild.AssemblyScript(t, sdkDir, "propfilter/index.ts")
	// The scaffold's sample messages (messages.jsonl) and one more.
	batch := []message.Record{
		record(t, "created", "order-1", map[string]string{"region": "eu", "tier": "gold"}),
		record(t, "created", "order-2", map[string]string{"region": "us", "tier": "gold"}),
		record(t, "paid", "order-3", map[string]string{"region": "eu"}),
		record(t, "paid", "order-4", nil),
	}
	table := map[string][]bool{
		"region=eu":                {true, false, true, false},
		"region=eu&tier=gold":      {true, false, false, false},
		"tier=gold":                {true, true, false, false},
		" tier = gold & region=us": {false, true, false, false},
		"region=asia":              {false, false, false, false},
	}
	for name, module := range map[string][]byte{"assemblyscript": as, "go": goScaffoldFilter(t)} {
		t.Run(name, func(t *testing.T) {
			p, err := wasm.Load(t.Context(), wasm.Options{Name: "props", Kind: wasm.KindFilter, Module: module,
				CacheDir: t.TempDir(), Logger: quiet})
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close(t.Context())
			for expr, want := range table {
				f, err := p.Filter(expr)
				if err != nil {
					t.Fatalf("%s: %v", expr, err)
				}
				got := make([]bool, len(batch))
				if err := f.Match(batch, got); err != nil {
					t.Fatalf("%s: %v", expr, err)
				}
				for i := range want {
					if got[i] != want[i] {
						t.Errorf("%s on message %d: %v, want %v", expr, i, got[i], want[i])
					}
				}
			}
			for _, bad := range []string{"", "region", "=eu", "region="} {
				if _, err := p.Filter(bad); !errors.Is(err, wasm.ErrExpression) {
					t.Errorf("Filter(%q) = %v, want ErrExpression", bad, err)
				}
			}
		})
	}
}
