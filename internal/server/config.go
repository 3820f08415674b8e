package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// The config file is Config in YAML: each key is the yaml tag of a field
// of Config or of the component Options it holds, so flags, file and code
// share one set of names and the components keep their own defaults and
// checks. The file is strict: an unknown key is an error.
//
// Besides the yaml tag, a field may carry a cfg tag saying how the file
// writes it:
//
//	cfg:"size"  an integer of bytes, or a number with a unit: 4KiB, 64MiB, 1GiB
//	cfg:"not"   a switch stated the other way round (enablePropertyFilter: false
//	            sets DisablePropertyFilter)
//	cfg:"path"  a file name, relative to the config file's directory
//	cfg:"json"  bytes: a string's own, anything else encoded as JSON
//	cfg:"acl"   a plain_acl.yml document (core/acl): its dataVersion block,
//	            RocketMQ's bookkeeping, is accepted and ignored, and a
//	            section without an enabled key is on
//
// and a dotted yaml tag (limits.deadline) names a key of a nested section
// (limits: {deadline: 1s}).

// ReadFile reads the config file at path onto c: keys in the file replace
// c's fields, others keep their value.
func (c *Config) ReadFile(path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("config: %w", err)
	}
	if err := c.decode(data, filepath.Dir(path)); err != nil {
		return fmt.Errorf("config %s: %w", path, err)
	}
	return nil
}

// PluginFile returns a PluginSource that reads the plugin list of the
// config file at path again, as strictly as at startup.
func PluginFile(path string) func() ([]Plugin, error) {
	return func() ([]Plugin, error) {
		var c Config
		if err := c.ReadFile(path); err != nil {
			return nil, err
		}
		return c.Plugins, nil
	}
}

// decode decodes a YAML document onto c; dir is where relative paths start.
func (c *Config) decode(data []byte, dir string) error {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return err
	}
	if doc.Kind == 0 {
		return nil // an empty file
	}
	if len(doc.Content) == 1 {
		movedKeys(doc.Content[0])
	}
	// prepare refuses unknown keys: Node.Decode does not check them.
	return errors.Join(prepare(&doc, reflect.TypeFor[Config](), dir), doc.Decode(c))
}

// movedKeys rewrites the keys that moved since the file format began, so
// older files keep working:
//
//	flush                     → store.flush
//	natsBridge.outboxMaxBytes → outboxMaxBytes (the broker's)
//	natsBridge.enabled        false drops the section, true is the default
func movedKeys(root *yaml.Node) {
	if root.Kind != yaml.MappingNode {
		return
	}
	if k, v := take(root, "flush"); k != nil {
		_, store := lookup(root, "store")
		if store == nil || store.Kind != yaml.MappingNode {
			store = &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map", Line: k.Line}
			root.Content = append(root.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: "store", Line: k.Line}, store)
		}
		store.Content = append(store.Content, k, v)
	}
	_, bridge := lookup(root, "natsBridge")
	if bridge == nil || bridge.Kind != yaml.MappingNode {
		return
	}
	if k, v := take(bridge, "outboxMaxBytes"); k != nil {
		root.Content = append(root.Content, k, v)
	}
	if k, v := take(bridge, "enabled"); k != nil && v.Tag == "!!bool" {
		if on, _ := strconv.ParseBool(strings.ToLower(v.Value)); !on {
			take(root, "natsBridge")
		}
	} else if k != nil {
		bridge.Content = append(bridge.Content, k, v) // not a bool: let the decoder say so
	}
}

// lookup returns the key and value nodes of key in mapping m.
func lookup(m *yaml.Node, key string) (k, v *yaml.Node) {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i], m.Content[i+1]
		}
	}
	return nil, nil
}

// take removes key from mapping m and returns its nodes.
func take(m *yaml.Node, key string) (k, v *yaml.Node) {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			k, v = m.Content[i], m.Content[i+1]
			m.Content = slices.Delete(m.Content, i, i+2)
			return k, v
		}
	}
	return nil, nil
}

// prepare rewrites the tree n, bound for a value of type t, by the cfg tags
// and dotted names of t's fields, so that the yaml decoder reads it as is.
func prepare(n *yaml.Node, t reflect.Type, dir string) error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	var errs []error
	switch {
	case n.Kind == yaml.DocumentNode:
		for _, c := range n.Content {
			errs = append(errs, prepare(c, t, dir))
		}
	case n.Kind == yaml.SequenceNode && (t.Kind() == reflect.Slice || t.Kind() == reflect.Array):
		for _, c := range n.Content {
			errs = append(errs, prepare(c, t.Elem(), dir))
		}
	case n.Kind == yaml.MappingNode && t.Kind() == reflect.Map:
		for i := 1; i < len(n.Content); i += 2 {
			errs = append(errs, prepare(n.Content[i], t.Elem(), dir))
		}
	case n.Kind == yaml.MappingNode && t.Kind() == reflect.Struct:
		fields := map[string]reflect.StructField{}
		yamlFields(t, fields)
		flattenSections(n, fields)
		var kept []*yaml.Node
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			f, ok := fields[k.Value]
			if !ok {
				errs = append(errs, fmt.Errorf("line %d: field %s not found in type %s", k.Line, k.Value, t))
				continue
			}
			drop, err := convert(v, f.Tag.Get("cfg"), dir)
			if err != nil {
				errs = append(errs, fmt.Errorf("line %d: %s: %w", v.Line, k.Value, err))
				continue
			}
			if !drop {
				errs = append(errs, prepare(v, f.Type, dir))
				kept = append(kept, k, v)
			}
		}
		n.Content = kept
	}
	return errors.Join(errs...)
}

// yamlFields maps the yaml names of t's fields, inline ones included, to
// the fields.
func yamlFields(t reflect.Type, into map[string]reflect.StructField) {
	for i := range t.NumField() {
		f := t.Field(i)
		name, opts, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if name == "-" || !f.IsExported() {
			continue
		}
		if opts == "inline" {
			yamlFields(f.Type, into)
			continue
		}
		if name == "" {
			name = strings.ToLower(f.Name)
		}
		into[name] = f
	}
}

// flattenSections replaces a section such as limits: {deadline: 1s} with
// the dotted keys (limits.deadline: 1s) of the fields that hold it.
func flattenSections(m *yaml.Node, fields map[string]reflect.StructField) {
	section := func(key string) bool {
		for name := range fields {
			if strings.HasPrefix(name, key+".") {
				return true
			}
		}
		return false
	}
	var out []*yaml.Node
	for i := 0; i+1 < len(m.Content); i += 2 {
		k, v := m.Content[i], m.Content[i+1]
		if v.Kind != yaml.MappingNode || !section(k.Value) {
			out = append(out, k, v)
			continue
		}
		for j := 0; j+1 < len(v.Content); j += 2 {
			sk := *v.Content[j]
			sk.Value = k.Value + "." + sk.Value
			out = append(out, &sk, v.Content[j+1])
		}
	}
	m.Content = out
}

// convert rewrites the value v of a field whose cfg tag is op; drop means
// the key is to be left out (a null cfg:"json" value).
func convert(v *yaml.Node, op, dir string) (drop bool, err error) {
	switch op {
	case "size":
		if v.Kind != yaml.ScalarNode || v.Tag == "!!int" {
			return false, nil
		}
		n, err := ParseSize(v.Value)
		if err != nil {
			return false, err
		}
		v.Value, v.Tag, v.Style = strconv.FormatInt(n, 10), "!!int", 0
	case "not":
		if v.Kind == yaml.ScalarNode && v.Tag == "!!bool" {
			b, _ := strconv.ParseBool(strings.ToLower(v.Value))
			v.Value = strconv.FormatBool(!b)
		}
	case "path":
		if v.Kind == yaml.ScalarNode && v.Value != "" && dir != "" && !filepath.IsAbs(v.Value) {
			v.Value = filepath.Join(dir, v.Value)
		}
	case "acl":
		if v.Kind == yaml.MappingNode {
			take(v, "dataVersion")
			// A plain_acl.yml has no enabled key: RocketMQ turns it on
			// in broker.conf (aclEnable). Placing one here is that.
			if k, e := take(v, "enabled"); k != nil {
				v.Content = append(v.Content, k, e)
			} else {
				v.Content = append(v.Content,
					&yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: "enabled", Line: v.Line},
					&yaml.Node{Kind: yaml.ScalarNode, Tag: "!!bool", Value: "true", Line: v.Line})
			}
		}
	case "json":
		if v.Kind == yaml.ScalarNode && v.Tag == "!!null" {
			return true, nil
		}
		b := []byte(v.Value)
		if v.Kind != yaml.ScalarNode || v.Tag != "!!str" {
			var x any
			if err := v.Decode(&x); err != nil {
				return false, err
			}
			if b, err = json.Marshal(x); err != nil {
				return false, fmt.Errorf("the value cannot be passed as JSON (%v); quote it to pass a string", err)
			}
		}
		// The decoder fills a []byte from a sequence of numbers only.
		seq := yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq", Line: v.Line, Column: v.Column, Content: make([]*yaml.Node, len(b))}
		for i, c := range b {
			seq.Content[i] = &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!int", Value: strconv.Itoa(int(c)), Line: v.Line}
		}
		*v = seq
	}
	return false, nil
}

// ParseSize parses a size in bytes: a number, optionally with a unit KiB,
// MiB or GiB (KB, MB, GB, K, M and G are powers of 1024 too; B is bytes).
func ParseSize(s string) (int64, error) {
	s = strings.TrimSpace(s)
	units := []struct {
		suffix string
		mult   int64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"KB", 1 << 10}, {"MB", 1 << 20}, {"GB", 1 << 30}, {"K", 1 << 10}, {"M", 1 << 20}, {"G", 1 << 30}, {"B", 1}}
	mult := int64(1)
	for _, u := range units {
		if strings.HasSuffix(s, u.suffix) {
			s, mult = strings.TrimSpace(strings.TrimSuffix(s, u.suffix)), u.mult
			break
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("bad size %q: want a number of bytes, optionally with KiB, MiB or GiB", s)
	}
	return n * mult, nil
}
