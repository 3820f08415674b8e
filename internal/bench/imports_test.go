package bench

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestImports keeps the bench a client of the wire protocol: it may use
// core/remoting and core/message, never the broker, the store or the name
// server, and nothing outside the standard library.
func TestImports(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	const module = "github.com/rmq-go/rmq/"
	allowed := map[string]bool{module + "core/remoting": true, module + "core/message": true}
	for _, name := range files {
		f, err := parser.ParseFile(token.NewFileSet(), name, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			if strings.HasPrefix(path, module) && !allowed[path] {
				t.Errorf("%s imports %s", name, path)
			}
			if !strings.HasPrefix(path, module) && strings.Contains(strings.Split(path, "/")[0], ".") {
				t.Errorf("%s imports %s; the package uses only the standard library", name, path)
			}
		}
	}
}
