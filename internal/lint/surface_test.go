package lint

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// maxBrokerMethods bounds *broker.Broker's exported methods: the
// lifecycle, the typed operations both front ends call (sends, ending a
// transaction, recalling a delayed message, ...), and the handles (View,
// Outbox, Admin, Hooks) that carry what one audience alone needs.
const maxBrokerMethods = 26

// TestBrokerSurface keeps *broker.Broker small: a new view, callback or
// test hook goes on one of its handles or in export_test.go, not on the
// broker.
func TestBrokerSurface(t *testing.T) {
	names := exportedMethods(t, filepath.Join("..", "..", "core", "broker"), "Broker")
	if len(names) > maxBrokerMethods {
		t.Errorf("*broker.Broker exports %d methods, at most %d: %s\n"+
			"put a read-only view on View, an event-log read on Outbox, an admin command on Admin, a callback on Hooks, a test hook in export_test.go",
			len(names), maxBrokerMethods, strings.Join(names, " "))
	}
	if len(names) < 10 {
		t.Errorf("found only %d exported methods on *broker.Broker (%v): is the parse looking at the right package?", len(names), names)
	}
}

// exportedMethods lists the exported methods on *typ (or typ) declared in
// dir's non-test files.
func exportedMethods(t *testing.T, dir, typ string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	var names []string
	for _, e := range ents {
		n := e.Name()
		if !strings.HasSuffix(n, ".go") || strings.HasSuffix(n, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, n), nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Recv == nil || len(fd.Recv.List) != 1 || !fd.Name.IsExported() {
				continue
			}
			rt := fd.Recv.List[0].Type
			if st, ok := rt.(*ast.StarExpr); ok {
				rt = st.X
			}
			if id, ok := rt.(*ast.Ident); ok && id.Name == typ {
				names = append(names, fd.Name.Name)
			}
		}
	}
	slices.Sort(names)
	return names
}
