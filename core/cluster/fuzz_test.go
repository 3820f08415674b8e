package cluster

import (
	"bytes"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// FuzzParsePeers: any input parses or is refused; what parses names
// distinct ids with addresses that split into host and port.
func FuzzParsePeers(f *testing.F) {
	f.Add("n0=127.0.0.1:7000,n1=127.0.0.1:7001")
	f.Add("a=b")
	f.Add(" x = [::1]:1 ,, y=h:2")
	f.Fuzz(func(t *testing.T, s string) {
		peers, err := ParsePeers(s)
		if err != nil {
			return
		}
		seen := map[string]bool{}
		for _, p := range peers {
			if p.ID == "" || seen[p.ID] || strings.Contains(p.ID, ",") {
				t.Fatalf("%q: bad peer %+v", s, p)
			}
			seen[p.ID] = true
			if _, _, err := net.SplitHostPort(p.Addr); err != nil {
				t.Fatalf("%q: address %q: %v", s, p.Addr, err)
			}
		}
	})
}

// FuzzLogStore stores arbitrary raft log entries, one after another, and
// reads them back.
func FuzzLogStore(f *testing.F) {
	f.Add(uint64(2), uint8(raft.LogCommand), []byte("data"), []byte(nil))
	f.Add(uint64(0), uint8(255), []byte{}, []byte{1, 2})
	s, err := openLogStore(f.TempDir(), retention{}, 0, hclog.NewNullLogger())
	if err != nil {
		f.Fatal(err)
	}
	defer s.Close()
	var index uint64
	f.Fuzz(func(t *testing.T, term uint64, typ uint8, data, ext []byte) {
		index++
		in := &raft.Log{Index: index, Term: term, Type: raft.LogType(typ), Data: data, Extensions: ext, AppendedAt: time.Unix(0, 12345)}
		if err := s.StoreLogs([]*raft.Log{in}); err != nil {
			t.Fatal(err)
		}
		var out raft.Log
		if err := s.GetLog(index, &out); err != nil {
			t.Fatal(err)
		}
		if out.Index != index || out.Term != term || out.Type != in.Type || !bytes.Equal(out.Data, data) ||
			!bytes.Equal(out.Extensions, ext) || !out.AppendedAt.Equal(in.AppendedAt) {
			t.Fatalf("stored %+v, read %+v", in, out)
		}
	})
}

// FuzzPebbleLogEntry decodes arbitrary values as entries of the pebble
// log a member moves into raft-wal: an error, never a panic.
func FuzzPebbleLogEntry(f *testing.F) {
	f.Add(uint64(7), encodePebbleEntry(&raft.Log{Term: 3, Type: raft.LogCommand, Data: []byte("round"), AppendedAt: time.Unix(5, 0)}))
	f.Add(uint64(1), []byte{0, 1, 2})
	f.Fuzz(func(t *testing.T, index uint64, v []byte) {
		l, err := decodePebbleEntry(index, v)
		if err != nil {
			return
		}
		if l.Index != index || len(l.Data) > len(v) {
			t.Fatalf("decoded %+v from %d bytes", l, len(v))
		}
	})
}
