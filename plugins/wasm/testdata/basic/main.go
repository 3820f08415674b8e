// Command basic is the host's test plugin. It serves every kind, and its
// filter misbehaves on request, so one module covers the host's paths.
//
// Filter expressions:
//
//	A||B         matches messages tagged A or B ("*" matches all)
//	body:TEXT    matches bodies containing TEXT (with config "body")
//	env:K=V      matches all if the environment has K=V, none otherwise
//	prop:K=V     matches property K = V, reading only K (and fails if the
//	             host sends any other property)
//	fs           matches all if reading a file fails (no filesystem)
//	log          logs one line per batch and matches all
//	reject       fails to compile
//	fail         returns an error from Match
//	panic        panics in Match
//	loop         never returns from Match
//	oom          allocates until memory runs out
//
// Config words (space-separated): "body" asks for bodies, "inflate" for
// them inflated by the host, "init-fail"
// refuses the config, "bad-selftest" adds a wrong self-test vector, and
// "version=X" sets the version label. The environment variable KINDS limits
// the kinds registered (e.g. "filter").
package main

import (
	"bytes"
	"errors"
	"os"
	"strings"
	"time"

	"github.com/rmq-go/rmq/sdk"
)

type filter struct{ body, inflate bool }

func (f *filter) NeedsBody() bool { return f.body }

func (f *filter) InflateBodies() bool { return f.inflate }

func (f *filter) Init(config []byte) error {
	for _, w := range strings.Fields(string(config)) {
		switch {
		case w == "body":
			f.body = true
		case w == "inflate":
			f.body, f.inflate = true, true
		case w == "init-fail":
			return errors.New("config says init-fail")
		case w == "bad-selftest":
			sdk.AddFilterTest(sdk.FilterTest{Expression: "A", Message: sdk.TestMessage{Tags: "A"}, Match: false})
		case strings.HasPrefix(w, "version="):
			sdk.SetVersion(strings.TrimPrefix(w, "version="))
		}
	}
	return nil
}

var hoard [][]byte

// keyed matches one property and declares it is all it reads.
type keyed struct{ key, value string }

func (k keyed) PropertyKeys() []string { return []string{k.key} }

func (k keyed) Match(m *sdk.Message) (bool, error) {
	var other string
	m.Properties().Each(func(key, _ string) bool {
		if key != k.key {
			other = key
		}
		return other == ""
	})
	if other != "" {
		return false, errors.New("host sent property " + other)
	}
	v, ok := m.Property(k.key)
	return ok && v == k.value, nil
}

func (f *filter) Compile(expr string) (sdk.Matcher, error) {
	all := sdk.MatcherFunc(func(*sdk.Message) (bool, error) { return true, nil })
	switch {
	case expr == "reject":
		return nil, errors.New("expression \"reject\" is refused")
	case expr == "fail":
		return sdk.MatcherFunc(func(*sdk.Message) (bool, error) { return false, errors.New("asked to fail") }), nil
	case expr == "panic":
		return sdk.MatcherFunc(func(m *sdk.Message) (bool, error) { panic("asked to panic at offset " + itoa(m.QueueOffset())) }), nil
	case expr == "loop":
		return sdk.MatcherFunc(func(*sdk.Message) (bool, error) {
			for {
			}
		}), nil
	case expr == "oom":
		return sdk.MatcherFunc(func(*sdk.Message) (bool, error) {
			for {
				hoard = append(hoard, make([]byte, 1<<20))
			}
		}), nil
	case expr == "log":
		return sdk.MatcherFunc(func(m *sdk.Message) (bool, error) {
			sdk.Log(sdk.LevelWarn, "saw topic "+m.Topic())
			return true, nil
		}), nil
	case expr == "fs":
		_, err := os.ReadFile("/etc/hostname")
		if err == nil {
			return nil, nil
		}
		return all, nil
	case strings.HasPrefix(expr, "env:"):
		k, v, _ := strings.Cut(strings.TrimPrefix(expr, "env:"), "=")
		want := os.Getenv(k) == v
		return sdk.MatcherFunc(func(*sdk.Message) (bool, error) { return want, nil }), nil
	case strings.HasPrefix(expr, "body:"):
		text := []byte(strings.TrimPrefix(expr, "body:"))
		return sdk.MatcherFunc(func(m *sdk.Message) (bool, error) {
			if !m.HasBody() {
				return false, errors.New("no body")
			}
			return bytes.Contains(m.Body(), text), nil
		}), nil
	case strings.HasPrefix(expr, "prop:"):
		k, v, _ := strings.Cut(strings.TrimPrefix(expr, "prop:"), "=")
		return keyed{key: k, value: v}, nil
	case expr == "*":
		return all, nil
	}
	tags := strings.Split(expr, "||")
	return sdk.MatcherFunc(func(m *sdk.Message) (bool, error) {
		t := m.Tags()
		for _, want := range tags {
			if t == want {
				return true, nil
			}
		}
		return false, nil
	}), nil
}

func itoa(v int64) string {
	var b [20]byte
	i := len(b)
	for {
		i--
		b[i] = byte('0' + v%10)
		v /= 10
		if v == 0 {
			return string(b[i:])
		}
	}
}

// averagely is RocketMQ's AllocateMessageQueueAveragely.
func averagely(req *sdk.AllocateRequest) ([]int, error) {
	idx := -1
	for i, c := range req.Clients {
		if c == req.ClientID {
			idx = i
		}
	}
	if idx < 0 {
		return nil, errors.New("client " + req.ClientID + " is not in the group")
	}
	n, q := len(req.Clients), len(req.Queues)
	mod := q % n
	size := q / n
	if idx < mod {
		size++
	}
	start := idx*size + mod
	if idx < mod {
		start = idx * size
	}
	var out []int
	for i := 0; i < size && start+i < q; i++ {
		out = append(out, start+i)
	}
	return out, nil
}

func txn(m *sdk.HalfMessage, now int64) (sdk.Decision, error) {
	switch m.Properties().Get("state") {
	case "commit":
		return sdk.Decision{Action: sdk.Commit}, nil
	case "rollback":
		return sdk.Decision{Action: sdk.Rollback}, nil
	case "fail":
		return sdk.Decision{}, errors.New("asked to fail")
	}
	if m.CheckTimes() >= 3 {
		return sdk.Decision{Action: sdk.Discard}, nil
	}
	if now-m.StoreTimestamp() < 1000 {
		return sdk.Decision{Action: sdk.Wait, Wait: time.Duration(1000-(now-m.StoreTimestamp())) * time.Millisecond}, nil
	}
	return sdk.Decision{Action: sdk.CheckNow}, nil
}

func init() {
	kinds := os.Getenv("KINDS")
	if kinds == "" || strings.Contains(kinds, "filter") {
		sdk.RegisterFilter(&filter{})
		sdk.AddFilterTest(sdk.FilterTest{Expression: "A||B", Message: sdk.TestMessage{Tags: "B"}, Match: true})
		sdk.AddFilterTest(sdk.FilterTest{Expression: "A||B", Message: sdk.TestMessage{Tags: "C"}, Match: false})
	}
	if kinds == "" || strings.Contains(kinds, "allocate") {
		sdk.RegisterAllocator(sdk.AllocatorFunc(averagely))
		sdk.AddAllocateTest(sdk.AllocateTest{
			Request: sdk.AllocateRequest{Group: "g", ClientID: "b", Clients: []string{"a", "b"}, Queues: make([]sdk.Queue, 5)},
			Want:    []int{3, 4},
		})
	}
	if kinds == "" || strings.Contains(kinds, "txncheck") {
		sdk.RegisterTxnPolicy(sdk.TxnPolicyFunc(txn))
		sdk.AddTxnTest(sdk.TxnTest{NowMs: 10_000, Message: sdk.TestHalfMessage{StoreTimestamp: 9_500},
			Want: sdk.Decision{Action: sdk.Wait, Wait: 500 * time.Millisecond}})
	}
	sdk.SetVersion("basic-1")
}

func main() {}
