// Package clientframes loads the corpus of request frames that official
// RocketMQ clients send (core/remoting/testdata/clients): one txtar file per
// client and request code, holding the frame's JSON header and body in the
// exact shape that client writes them. Tests replay the frames through the
// broker's decoders, and against a running broker.
//
// # File layout
//
// A file lives at CLIENT/CODE.txtar or CLIENT/CODE.VARIANT.txtar, where
// CLIENT names the client family (java, go, cpp) and CODE is the request
// code's name (HEART_BEAT). Its comment (the text before the first section)
// says which client, version and class the shape comes from. Sections:
//
//	-- header --     the JSON header, byte for byte
//	-- body --       the body as text (JSON bodies), if any
//	-- body.hex --   the body as hexadecimal (binary bodies), if any;
//	                 white space and lines starting with # are ignored
//
// txtar ends every section with a newline, which is not part of the header
// or body: one final newline is dropped. A section whose bytes really end
// with a newline (jsoncpp's FastWriter writes one) ends with an empty line.
package clientframes

import (
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/rogpeppe/go-internal/txtar"

	"github.com/rmq-go/rmq/core/remoting"
)

// Frame is one request frame of the corpus.
type Frame struct {
	Path    string // the file it was loaded from
	Client  string // the client family: the file's directory name
	Name    string // the request code's name, from the file name
	Variant string // the part of the file name between the code and .txtar, if any
	Comment string // where the shape comes from
	Header  []byte // the JSON header
	Body    []byte // the body; nil when the frame has none
}

// ErrBadFile is wrapped by the errors Load returns for a malformed file.
var ErrBadFile = errors.New("clientframes: malformed corpus file")

// Load reads one corpus file.
func Load(path string) (Frame, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Frame{}, err
	}
	return Parse(path, data)
}

// Parse reads a corpus file's contents; path gives the client and code
// names.
func Parse(path string, data []byte) (Frame, error) {
	base := strings.TrimSuffix(filepath.Base(path), ".txtar")
	name, variant, _ := strings.Cut(base, ".")
	f := Frame{Path: path, Client: filepath.Base(filepath.Dir(path)), Name: name, Variant: variant}
	a := txtar.Parse(data)
	f.Comment = strings.TrimSpace(string(a.Comment))
	if f.Comment == "" {
		return f, fmt.Errorf("%w: %s: no comment naming the client class the shape comes from", ErrBadFile, path)
	}
	seen := map[string]bool{}
	for _, s := range a.Files {
		if seen[s.Name] {
			return f, fmt.Errorf("%w: %s: section %q twice", ErrBadFile, path, s.Name)
		}
		seen[s.Name] = true
		content := strings.TrimSuffix(string(s.Data), "\n")
		switch s.Name {
		case "header":
			f.Header = []byte(content)
		case "body":
			f.Body = []byte(content)
		case "body.hex":
			var digits strings.Builder
			for _, line := range strings.Split(content, "\n") {
				if t := strings.TrimSpace(line); !strings.HasPrefix(t, "#") {
					digits.WriteString(strings.Join(strings.Fields(t), ""))
				}
			}
			b, err := hex.DecodeString(digits.String())
			if err != nil {
				return f, fmt.Errorf("%w: %s: body.hex: %v", ErrBadFile, path, err)
			}
			f.Body = b
		default:
			return f, fmt.Errorf("%w: %s: unknown section %q (want header, body or body.hex)", ErrBadFile, path, s.Name)
		}
	}
	if f.Header == nil {
		return f, fmt.Errorf("%w: %s: no header section", ErrBadFile, path)
	}
	if seen["body"] && seen["body.hex"] {
		return f, fmt.Errorf("%w: %s: both body and body.hex", ErrBadFile, path)
	}
	return f, nil
}

// LoadAll reads every CLIENT/*.txtar file under dir, sorted by path.
func LoadAll(dir string) ([]Frame, error) {
	paths, err := filepath.Glob(filepath.Join(dir, "*", "*.txtar"))
	if err != nil {
		return nil, err
	}
	if len(paths) == 0 {
		return nil, fmt.Errorf("clientframes: no corpus files under %s", dir)
	}
	sort.Strings(paths)
	out := make([]Frame, 0, len(paths))
	for _, p := range paths {
		f, err := Load(p)
		if err != nil {
			return nil, err
		}
		out = append(out, f)
	}
	return out, nil
}

// Wire returns the frame as the client puts it on the wire: length,
// serialization type 0 (JSON), header length, header, body.
func (f Frame) Wire() []byte {
	n := 4 + len(f.Header) + len(f.Body)
	b := make([]byte, 0, 4+n)
	b = append(b, byte(n>>24), byte(n>>16), byte(n>>8), byte(n))
	h := len(f.Header)
	b = append(b, 0, byte(h>>16), byte(h>>8), byte(h))
	b = append(b, f.Header...)
	return append(b, f.Body...)
}

// Command decodes the frame the way a server reads it from a connection.
func (f Frame) Command() (*remoting.Command, error) {
	var c remoting.Command
	if err := remoting.DecodeFrame(f.Wire()[4:], &c); err != nil {
		return nil, fmt.Errorf("%s: %w", f.Path, err)
	}
	return &c, nil
}

// String names the file relative to its corpus: client/CODE[.variant].
func (f Frame) String() string {
	s := f.Client + "/" + f.Name
	if f.Variant != "" {
		s += "." + f.Variant
	}
	return s
}
