package apacheimport_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/rmq-go/rmq/internal/apacheimport"
)

// FuzzDecodeJSON runs the four JSON decoders on any input: none panics,
// and on input that is JSON already the bare-key quoting changes
// nothing, so each decodes as encoding/json does.
func FuzzDecodeJSON(f *testing.F) {
	for _, name := range []string{apacheimport.TopicsFile, apacheimport.GroupsFile, apacheimport.OffsetsFile, apacheimport.DelayOffsetsFile} {
		b, err := os.ReadFile(filepath.Join("testdata/apache5/config", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(`{"offsetTable":{"a@b":{"0":1}},"x":["a",{"k":"v\"}"}]}`))
	f.Add([]byte(`{1:{2:[{3:4}]}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		topics, terr := apacheimport.DecodeTopics(b)
		groups, gerr := apacheimport.DecodeGroups(b)
		offsets, oerr := apacheimport.DecodeOffsets(b)
		delay, derr := apacheimport.DecodeDelayOffsets(b)
		if !json.Valid(b) {
			return
		}
		var wantT apacheimport.Topics
		if err := json.Unmarshal(b, &wantT); (err == nil) != (terr == nil) {
			t.Fatalf("topics: %v, encoding/json: %v", terr, err)
		} else if err == nil && len(wantT.TopicConfigTable) != len(topics.TopicConfigTable) {
			t.Fatalf("topics: %d, encoding/json %d", len(topics.TopicConfigTable), len(wantT.TopicConfigTable))
		}
		var wantG apacheimport.Groups
		if err := json.Unmarshal(b, &wantG); (err == nil) != (gerr == nil) {
			t.Fatalf("groups: %v, encoding/json: %v", gerr, err)
		} else if err == nil && len(wantG.SubscriptionGroupTable) != len(groups.SubscriptionGroupTable) {
			t.Fatalf("groups: %d, encoding/json %d", len(groups.SubscriptionGroupTable), len(wantG.SubscriptionGroupTable))
		}
		var wantO apacheimport.Offsets
		if err := json.Unmarshal(b, &wantO); (err == nil) != (oerr == nil) {
			t.Fatalf("offsets: %v, encoding/json: %v", oerr, err)
		} else if err == nil && !reflect.DeepEqual(wantO, *offsets) {
			t.Fatalf("offsets: %+v, encoding/json %+v", *offsets, wantO)
		}
		var wantD apacheimport.DelayOffsets
		if err := json.Unmarshal(b, &wantD); (err == nil) != (derr == nil) {
			t.Fatalf("delay offsets: %v, encoding/json: %v", derr, err)
		} else if err == nil && !reflect.DeepEqual(wantD, *delay) {
			t.Fatalf("delay offsets: %+v, encoding/json %+v", *delay, wantD)
		}
	})
}

// FuzzDecodeProperties: no input panics, and what is returned has each
// key once, in the order of the lines.
func FuzzDecodeProperties(f *testing.F) {
	b, err := os.ReadFile("testdata/apache5/broker.conf")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b)
	f.Add([]byte("a=\\u0041\\\n b\\\\\n#c\n!d\ne:f g\n\\=k=v\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		props, err := apacheimport.DecodeProperties(b)
		if err != nil {
			return
		}
		seen := map[string]bool{}
		line := 0
		for _, p := range props {
			if seen[p.Key] {
				t.Fatalf("key %q twice", p.Key)
			}
			seen[p.Key] = true
			if p.Line <= line {
				t.Fatalf("line %d after %d", p.Line, line)
			}
			line = p.Line
		}
		apacheimport.MapBrokerConf(props) // must not panic either
	})
}
