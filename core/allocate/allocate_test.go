package allocate_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/rmq-go/rmq/core/allocate"
)

// queues returns n queues of topic T on broker, q0…q(n-1).
func queues(broker string, n int) []allocate.Queue {
	qs := make([]allocate.Queue, n)
	for i := range qs {
		qs[i] = allocate.Queue{Topic: "T", BrokerName: broker, QueueID: int32(i)}
	}
	return qs
}

// short writes queues as "broker:id" words.
func short(qs []allocate.Queue) string {
	var w []string
	for _, q := range qs {
		w = append(w, fmt.Sprintf("%s:%d", q.BrokerName, q.QueueID))
	}
	return "[" + strings.Join(w, " ") + "]"
}

// assign runs s for every client and returns the results in client order.
func assign(t testing.TB, s allocate.Strategy, clients []string, qs []allocate.Queue) []string {
	t.Helper()
	var out []string
	for _, c := range clients {
		got, err := s.Allocate("g", c, clients, qs)
		if err != nil {
			t.Fatalf("%s for %s: %v", s.Name(), c, err)
		}
		out = append(out, short(got))
	}
	return out
}

func TestAveragely(t *testing.T) {
	for _, c := range []struct {
		queues  int
		clients []string
		want    string
	}{
		{8, []string{"a", "b", "c"}, "[b:0 b:1 b:2] [b:3 b:4 b:5] [b:6 b:7]"},
		{8, []string{"a", "b"}, "[b:0 b:1 b:2 b:3] [b:4 b:5 b:6 b:7]"},
		{3, []string{"a", "b", "c", "d", "e"}, "[b:0] [b:1] [b:2] [] []"},
		{10, []string{"a", "b", "c", "d"}, "[b:0 b:1 b:2] [b:3 b:4 b:5] [b:6 b:7] [b:8 b:9]"},
		{7, []string{"a"}, "[b:0 b:1 b:2 b:3 b:4 b:5 b:6]"},
		{0, []string{"a", "b"}, "[] []"},
	} {
		if got := strings.Join(assign(t, allocate.Averagely, c.clients, queues("b", c.queues)), " "); got != c.want {
			t.Errorf("%d queues, %d clients: %s, want %s", c.queues, len(c.clients), got, c.want)
		}
	}
}

func TestByCircle(t *testing.T) {
	for _, c := range []struct {
		queues  int
		clients []string
		want    string
	}{
		{8, []string{"a", "b", "c"}, "[b:0 b:3 b:6] [b:1 b:4 b:7] [b:2 b:5]"},
		{2, []string{"a", "b", "c"}, "[b:0] [b:1] []"},
		{0, []string{"a"}, "[]"},
	} {
		if got := strings.Join(assign(t, allocate.ByCircle, c.clients, queues("b", c.queues)), " "); got != c.want {
			t.Errorf("%d queues, %d clients: %s, want %s", c.queues, len(c.clients), got, c.want)
		}
	}
}

func TestConsistentHash(t *testing.T) {
	clients := []string{"10.0.0.1@1", "10.0.0.2@1", "10.0.0.3@1"}
	qs := queues("broker-a", 32)
	got := assign(t, allocate.ConsistentHash(0), clients, qs)
	// Adding a client moves queues only to the new client.
	owner := map[string]string{}
	for i, c := range clients {
		for _, q := range strings.Fields(strings.Trim(got[i], "[]")) {
			owner[q] = c
		}
	}
	more := append(slices.Clone(clients), "10.0.0.4@1")
	after := assign(t, allocate.ConsistentHash(0), more, qs)
	moved := 0
	for i, c := range more {
		for _, q := range strings.Fields(strings.Trim(after[i], "[]")) {
			if owner[q] != c {
				moved++
				if c != "10.0.0.4@1" {
					t.Errorf("%s moved from %s to %s", q, owner[q], c)
				}
			}
		}
	}
	if moved == 0 || moved == len(qs) {
		t.Errorf("%d of %d queues moved to the new client", moved, len(qs))
	}
	if n := allocate.ConsistentHash(0).Name(); n != "CONSISTENT_HASH" {
		t.Errorf("name %s", n)
	}
	// One virtual node per client still assigns every queue.
	one := assign(t, allocate.ConsistentHash(1), clients, qs)
	if n := len(strings.Fields(strings.ReplaceAll(strings.ReplaceAll(strings.Join(one, " "), "[", ""), "]", ""))); n != len(qs) {
		t.Errorf("1 virtual node: %d of %d queues assigned", n, len(qs))
	}
}

func TestByConfig(t *testing.T) {
	fixed := []allocate.Queue{{Topic: "T", BrokerName: "b", QueueID: 5}, {Topic: "T", BrokerName: "a", QueueID: 1}}
	s := allocate.ByConfig(fixed)
	got := assign(t, s, []string{"x", "y"}, queues("b", 8))
	if want := "[a:1 b:5] [a:1 b:5]"; strings.Join(got, " ") != want || s.Name() != "CONFIG" {
		t.Errorf("%s: %v, want %s", s.Name(), got, want)
	}
	if _, err := s.Allocate("g", "z", []string{"x"}, nil); !errors.Is(err, allocate.ErrNotMember) {
		t.Errorf("outsider: %v", err)
	}
}

func TestMachineRoom(t *testing.T) {
	qs := slices.Concat(queues("hz@b1", 3), queues("sh@b2", 2), queues("plain", 2), queues("bj@", 1))
	s := allocate.MachineRoom([]string{"hz"})
	if got, want := strings.Join(assign(t, s, []string{"a", "b"}, qs), " "), "[hz@b1:0 hz@b1:2] [hz@b1:1]"; got != want || s.Name() != "MACHINE_ROOM" {
		t.Errorf("got %s, want %s", got, want)
	}
	s = allocate.MachineRoom([]string{"hz", "sh"})
	if got, want := strings.Join(assign(t, s, []string{"a", "b", "c"}, qs), " "), "[hz@b1:0 sh@b2:0] [hz@b1:1 sh@b2:1] [hz@b1:2]"; got != want {
		t.Errorf("got %s, want %s", got, want)
	}
	for name, want := range map[string]string{"hz@b1": "hz", "@b": "", "hz@": "-", "hz": "-", "a@b@c": "-"} {
		room, ok := allocate.BrokerRoom(name)
		if !ok {
			room = "-"
		}
		if room != want {
			t.Errorf("BrokerRoom(%q) = %q, want %q", name, room, want)
		}
	}
}

// roomOf reads a name's machine room from its "room@" prefix.
func roomOf(name string) string { r, _, _ := strings.Cut(name, "@"); return r }

func nearbyOf(inner allocate.Strategy) allocate.Strategy {
	return allocate.MachineRoomNearby(inner, func(q allocate.Queue) string { return roomOf(q.BrokerName) }, roomOf)
}

func TestMachineRoomNearby(t *testing.T) {
	qs := slices.Concat(queues("hz@b", 2), queues("sh@b", 2), queues("bj@b", 2))
	clients := []string{"hz@a", "hz@b", "sh@c"}
	s := nearbyOf(allocate.Averagely)
	if got, want := strings.Join(assign(t, s, clients, qs), " "), "[bj@b:0 hz@b:0] [bj@b:1 hz@b:1] [sh@b:0 sh@b:1]"; got != want || s.Name() != "MACHINE_ROOM_NEARBY-AVG" {
		t.Errorf("%s: got %s, want %s", s.Name(), got, want)
	}
	if _, err := s.Allocate("g", "@nowhere", []string{"@nowhere"}, qs); !errors.Is(err, allocate.ErrNoMachineRoom) {
		t.Errorf("client without a room: %v", err)
	}
}

func TestByName(t *testing.T) {
	for _, name := range []string{"AVG", "avg", "Avg_By_Circle", "consistent_hash"} {
		s, ok := allocate.ByName(name)
		if !ok || s.Name() != strings.ToUpper(name) {
			t.Errorf("ByName(%q) = %v, %v", name, s, ok)
		}
	}
	for _, name := range []string{"", "CONFIG", "MACHINE_ROOM", "AllocateMessageQueueAveragely"} {
		if s, ok := allocate.ByName(name); ok {
			t.Errorf("ByName(%q) = %s", name, s.Name())
		}
	}
	if got := fmt.Sprint(allocate.Names()); got != "[AVG AVG_BY_CIRCLE CONSISTENT_HASH]" {
		t.Errorf("Names() = %s", got)
	}
}

func TestNotMember(t *testing.T) {
	for _, s := range partitioning() {
		for _, clients := range [][]string{nil, {"a", "b"}} {
			got, err := s.Allocate("g", "stranger", clients, queues("hz@b", 4))
			if !errors.Is(err, allocate.ErrNotMember) || got != nil {
				t.Errorf("%s with clients %v: %v, %v", s.Name(), clients, got, err)
			}
		}
	}
}

func TestQueueString(t *testing.T) {
	q := allocate.Queue{Topic: "T", BrokerName: "broker-a", QueueID: 3}
	if got := q.String(); got != "MessageQueue [topic=T, brokerName=broker-a, queueId=3]" {
		t.Error(got)
	}
}

// partitioning lists the strategies of invariant 1.
func partitioning() []allocate.Strategy {
	return []allocate.Strategy{allocate.Averagely, allocate.ByCircle, allocate.ConsistentHash(0), allocate.ConsistentHash(3),
		nearbyOf(allocate.Averagely), nearbyOf(allocate.ConsistentHash(0))}
}

// checkInvariants checks invariants 1 to 3 of s over one input: every
// queue goes to exactly one client, AVG and AVG_BY_CIRCLE balance, and a
// shuffled, duplicated copy of the input gives each client the same
// queues.
func checkInvariants(t *testing.T, r *rand.Rand, s allocate.Strategy, clients []string, qs []allocate.Queue) {
	t.Helper()
	distinct := map[allocate.Queue]bool{}
	for _, q := range qs {
		distinct[q] = true
	}
	distinctClients := slices.Compact(slices.Sorted(slices.Values(clients)))
	owner := map[allocate.Queue]string{}
	lo, hi := len(qs)+1, -1
	for _, c := range distinctClients {
		got, err := s.Allocate("g", c, clients, qs)
		if err != nil {
			t.Fatalf("%s: %s: %v", s.Name(), c, err)
		}
		if got == nil || !slices.IsSortedFunc(got, allocate.Compare) {
			t.Fatalf("%s: %s: result nil or unsorted: %v", s.Name(), c, got)
		}
		for _, q := range got {
			if prev, dup := owner[q]; dup {
				t.Fatalf("%s: %v given to %s and %s", s.Name(), q, prev, c)
			}
			if !distinct[q] {
				t.Fatalf("%s: %v was not offered", s.Name(), q)
			}
			owner[q] = c
		}
		lo, hi = min(lo, len(got)), max(hi, len(got))

		// The same sets in another order, with duplicates, give the same.
		cs2 := append(slices.Clone(clients), clients[r.IntN(len(clients))])
		qs2 := slices.Clone(qs)
		if len(qs2) > 0 {
			qs2 = append(qs2, qs2[r.IntN(len(qs2))])
		}
		r.Shuffle(len(cs2), func(i, j int) { cs2[i], cs2[j] = cs2[j], cs2[i] })
		r.Shuffle(len(qs2), func(i, j int) { qs2[i], qs2[j] = qs2[j], qs2[i] })
		again, err := s.Allocate("g", c, cs2, qs2)
		if err != nil || !slices.Equal(got, again) {
			t.Fatalf("%s: %s: %v, then %v (%v) with the input reordered", s.Name(), c, got, again, err)
		}
	}
	if len(owner) != len(distinct) {
		t.Fatalf("%s: %d of %d queues assigned (%d clients)", s.Name(), len(owner), len(distinct), len(distinctClients))
	}
	if n := s.Name(); (n == "AVG" || n == "AVG_BY_CIRCLE") && hi-lo > 1 {
		t.Fatalf("%s: counts from %d to %d", n, lo, hi)
	}
}

// randomInput returns 1..20 clients and 0..64 queues spread over a few
// topics and brokers in a few machine rooms.
func randomInput(r *rand.Rand) ([]string, []allocate.Queue) {
	rooms := []string{"hz", "sh", "bj"}
	clients := make([]string, 1+r.IntN(20))
	for i := range clients {
		clients[i] = fmt.Sprintf("%s@10.0.%d.%d@%d", rooms[r.IntN(len(rooms))], r.IntN(3), r.IntN(256), r.IntN(100))
	}
	qs := make([]allocate.Queue, r.IntN(65))
	for i := range qs {
		qs[i] = allocate.Queue{Topic: fmt.Sprint("T", r.IntN(2)), BrokerName: fmt.Sprintf("%s@b%d", rooms[r.IntN(len(rooms))], r.IntN(3)), QueueID: int32(r.IntN(32))}
	}
	return clients, qs
}

func TestProperties(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 300 {
		clients, qs := randomInput(r)
		for _, s := range partitioning() {
			checkInvariants(t, r, s, clients, qs)
		}
	}
}

// FuzzAllocate builds a group and queues from bytes and checks the
// partitioning strategies' invariants.
func FuzzAllocate(f *testing.F) {
	f.Add([]byte("abc"), []byte{0, 1, 2, 3, 4, 5, 6, 7})
	f.Add([]byte("a"), []byte{})
	f.Add([]byte("aaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"), []byte{255, 0, 255, 17})
	f.Fuzz(func(t *testing.T, clientBytes, queueBytes []byte) {
		if len(clientBytes) == 0 || len(clientBytes) > 12 || len(queueBytes) > 48 { // small groups: CI runs 300,000 inputs
			return
		}
		rooms := []string{"hz", "sh", "bj"}
		var clients []string
		for _, b := range clientBytes {
			clients = append(clients, fmt.Sprintf("%s@c%d", rooms[b%3], b/3))
		}
		var qs []allocate.Queue
		for _, b := range queueBytes {
			qs = append(qs, allocate.Queue{Topic: fmt.Sprint("T", b>>7), BrokerName: fmt.Sprintf("%s@b%d", rooms[b%3], (b>>2)%2), QueueID: int32(b & 0x3f)})
		}
		r := rand.New(rand.NewPCG(uint64(len(clientBytes)), uint64(len(queueBytes))))
		for _, s := range partitioning() {
			checkInvariants(t, r, s, clients, qs)
		}
	})
}
