package lint

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// moduleRoot returns the module's root directory.
func moduleRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("module root not found: %v", err)
	}
	return root
}

// TestArchitectureListsEveryPackage fails naming each package of the
// module that docs/architecture.md does not name (as `path`, relative to
// the module).
func TestArchitectureListsEveryPackage(t *testing.T) {
	root := moduleRoot(t)
	doc, err := os.ReadFile(filepath.Join(root, "docs", "architecture.md"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("go", "list", "-e", "./...")
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v: %s", err, stderr.String())
	}
	pkgs := strings.Fields(string(out))
	if len(pkgs) < 20 {
		t.Fatalf("only %d packages listed; is go list broken?", len(pkgs))
	}
	for _, p := range pkgs {
		rel := strings.TrimPrefix(strings.TrimPrefix(p, module), "/")
		if rel == "" {
			continue
		}
		if missingPackage(doc, rel) {
			t.Errorf("package %s is not in docs/architecture.md: add a line for it to the Packages table", rel)
		}
	}
}

// missingPackage reports whether doc names package rel nowhere as `rel`.
func missingPackage(doc []byte, rel string) bool {
	return !bytes.Contains(doc, []byte("`"+rel+"`"))
}

// TestMissingPackageCatches proves the check fails for a package the
// document does not name, and passes for one it names.
func TestMissingPackageCatches(t *testing.T) {
	doc := []byte("| `core/store` | the store |\n| `core/store/storetest` | its contract |\n")
	if missingPackage(doc, "core/store") || missingPackage(doc, "core/store/storetest") {
		t.Fatal("a named package was reported missing")
	}
	if !missingPackage(doc, "core/cluster") || !missingPackage(doc, "core/stor") {
		t.Fatal("a package the document does not name was not reported")
	}
}

// mdLink matches a Markdown link or image: its target, up to a space or
// the closing parenthesis.
var mdLink = regexp.MustCompile(`\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)

// TestDocLinks checks every relative link of README.md, the other Markdown
// files at the root and docs/*.md: the file it names exists, and a
// #fragment into a Markdown file names one of its headings.
func TestDocLinks(t *testing.T) {
	root := moduleRoot(t)
	files, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	top, err := filepath.Glob(filepath.Join(root, "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	files = append(top, files...)
	if len(files) < 5 {
		t.Fatalf("only %d Markdown files found", len(files))
	}
	links := 0
	for _, f := range files {
		doc, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, problem := range checkLinks(root, f, doc) {
			t.Error(problem)
		}
		links += len(mdLink.FindAll(stripCode(doc), -1))
	}
	if links < 20 {
		t.Fatalf("only %d links found; is the pattern broken?", links)
	}
}

// checkLinks returns a line for each relative link of doc (the file f)
// that points nowhere.
func checkLinks(root, f string, doc []byte) []string {
	var problems []string
	relf, _ := filepath.Rel(root, f)
	relf = filepath.ToSlash(relf)
	for _, m := range mdLink.FindAllSubmatch(stripCode(doc), -1) {
		target := string(m[1])
		if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
			continue
		}
		path, frag, _ := strings.Cut(target, "#")
		abs := f
		if path != "" {
			abs = filepath.Join(filepath.Dir(f), filepath.FromSlash(path))
		}
		rel, err := filepath.Rel(root, abs)
		if err != nil || strings.HasPrefix(rel, "..") {
			problems = append(problems, relf+": link "+target+" leaves the repository")
			continue
		}
		rel = filepath.ToSlash(rel)
		body, err := os.ReadFile(abs)
		if err != nil {
			if info, serr := os.Stat(abs); serr == nil && info.IsDir() {
				continue
			}
			problems = append(problems, relf+": link "+target+": "+rel+" does not exist")
			continue
		}
		if frag != "" && strings.HasSuffix(rel, ".md") && !headingAnchors(body)[frag] {
			problems = append(problems, relf+": link "+target+": "+rel+" has no heading #"+frag)
		}
	}
	return problems
}

// fence matches a fenced code block, whose brackets are not links.
var fence = regexp.MustCompile("(?ms)^```.*?^```")

func stripCode(doc []byte) []byte {
	return fence.ReplaceAll(doc, nil)
}

// headingAnchors returns the anchors GitHub makes of doc's headings:
// lower case, punctuation other than '-' and '_' dropped, spaces made '-',
// a repeated anchor numbered -1, -2, ….
func headingAnchors(doc []byte) map[string]bool {
	anchors := map[string]bool{}
	seen := map[string]int{}
	for _, line := range strings.Split(string(stripCode(doc)), "\n") {
		if !strings.HasPrefix(line, "#") {
			continue
		}
		title := strings.TrimSpace(strings.TrimLeft(line, "#"))
		var b strings.Builder
		for _, r := range strings.ToLower(title) {
			switch {
			case r == ' ':
				b.WriteByte('-')
			case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r > 0x7f:
				b.WriteRune(r)
			}
		}
		a := b.String()
		if n := seen[a]; n > 0 {
			anchors[a+"-"+strconv.Itoa(n)] = true
		} else {
			anchors[a] = true
		}
		seen[a]++
	}
	return anchors
}

// TestCheckLinksCatches proves the link check fails on a missing file and
// on a missing heading, and passes on good links.
func TestCheckLinksCatches(t *testing.T) {
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "docs"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "docs", "a.md"), []byte("# A\n\n## How `bench compare` runs\n\n## RocketMQ 5 clients (gRPC)\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	f := filepath.Join(root, "README.md")
	good := "[a](docs/a.md) [b](docs/a.md#how-bench-compare-runs) [c](docs/a.md#rocketmq-5-clients-grpc) [e](https://example.com/x)\n```\n[not](a/link)\n```\n"
	if p := checkLinks(root, f, []byte(good)); len(p) != 0 {
		t.Fatalf("good links reported: %q", p)
	}
	for _, bad := range []string{"[x](docs/b.md)", "[x](docs/a.md#nowhere)", "[x](../outside.md)", "[x](docs/other.md)"} {
		if p := checkLinks(root, f, []byte(bad)); len(p) != 1 {
			t.Errorf("%s: got %q, want one problem", bad, p)
		}
	}
}
