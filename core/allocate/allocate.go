package allocate

import (
	"cmp"
	"errors"
	"slices"
	"strconv"
	"strings"
)

// Errors. Compare with errors.Is.
var (
	// ErrNotMember is returned when the client asking is not in the
	// group's client list. RocketMQ's clients answer "no queues" there;
	// here the caller decides, so a stale client list is visible.
	ErrNotMember = errors.New("allocate: client not in group")
	// ErrNoMachineRoom is returned by MACHINE_ROOM_NEARBY when its
	// resolver gives a queue or a client no machine room.
	ErrNoMachineRoom = errors.New("allocate: no machine room")
)

// Queue names one message queue, in RocketMQ's MessageQueue JSON shape.
type Queue struct {
	Topic      string `json:"topic"`
	BrokerName string `json:"brokerName"`
	QueueID    int32  `json:"queueId"`
}

// String returns the queue as RocketMQ's MessageQueue.toString writes it,
// "MessageQueue [topic=T, brokerName=B, queueId=0]". CONSISTENT_HASH hashes
// this text, so the ring places queues where RocketMQ's clients do.
func (q Queue) String() string {
	return "MessageQueue [topic=" + q.Topic + ", brokerName=" + q.BrokerName + ", queueId=" + strconv.Itoa(int(q.QueueID)) + "]"
}

// Compare orders queues by topic, broker name and queue id, as
// MessageQueue.compareTo does. Every strategy sees its queues in this
// order.
func Compare(a, b Queue) int {
	if c := strings.Compare(a.Topic, b.Topic); c != 0 {
		return c
	}
	if c := strings.Compare(a.BrokerName, b.BrokerName); c != 0 {
		return c
	}
	return cmp.Compare(a.QueueID, b.QueueID)
}

// Strategy assigns a consumer group's queues to its clients. Allocate
// returns the queues of clientID, sorted by Compare; it sorts and
// deduplicates copies of clients and queues first, so the order of the
// inputs never matters and they are not modified. A clientID missing from
// clients is ErrNotMember. Implementations are safe for concurrent use.
type Strategy interface {
	// Name is RocketMQ's name of the strategy, such as "AVG".
	Name() string
	Allocate(group, clientID string, clients []string, queues []Queue) ([]Queue, error)
}

// RocketMQ's strategy names, as Strategy.Name returns them.
const (
	NameAveragely         = "AVG"
	NameByCircle          = "AVG_BY_CIRCLE"
	NameConsistentHash    = "CONSISTENT_HASH"
	NameConfig            = "CONFIG"
	NameMachineRoom       = "MACHINE_ROOM"
	NameMachineRoomNearby = "MACHINE_ROOM_NEARBY" // followed by "-" and the inner strategy's name
)

// DefaultVirtualNodes is the number of ring points per client of
// ConsistentHash(0), RocketMQ's default.
const DefaultVirtualNodes = 10

// ByName returns the strategy of a name that needs no configuration: AVG,
// AVG_BY_CIRCLE or CONSISTENT_HASH (with DefaultVirtualNodes), in any
// case. The configured strategies are built with ByConfig, MachineRoom
// and MachineRoomNearby.
func ByName(name string) (Strategy, bool) {
	switch strings.ToUpper(name) {
	case NameAveragely:
		return Averagely, true
	case NameByCircle:
		return ByCircle, true
	case NameConsistentHash:
		return defaultHash, true
	}
	return nil, false
}

// Names lists the names ByName knows.
func Names() []string { return []string{NameAveragely, NameByCircle, NameConsistentHash} }

// prepare returns sorted, deduplicated copies of clients and queues and
// the index of clientID among the clients.
func prepare(clientID string, clients []string, queues []Queue) ([]string, []Queue, int, error) {
	cs := slices.Clone(clients)
	slices.Sort(cs)
	cs = slices.Compact(cs)
	idx, found := slices.BinarySearch(cs, clientID)
	if !found {
		return nil, nil, -1, ErrNotMember
	}
	return cs, sortQueues(queues), idx, nil
}

// sortQueues returns a sorted, deduplicated copy of queues, never nil.
func sortQueues(queues []Queue) []Queue {
	qs := append([]Queue{}, queues...)
	slices.SortFunc(qs, Compare)
	return slices.Compact(qs)
}

// Averagely is AVG (AllocateMessageQueueAveragely): each client takes a
// contiguous run of the sorted queues; when the queues do not divide
// evenly, the first q mod n clients take one more.
var Averagely Strategy = averagely{}

type averagely struct{}

func (averagely) Name() string { return NameAveragely }

func (averagely) Allocate(_, clientID string, clients []string, queues []Queue) ([]Queue, error) {
	cs, qs, idx, err := prepare(clientID, clients, queues)
	if err != nil {
		return nil, err
	}
	start, end := avgRange(idx, len(cs), len(qs))
	return slices.Clip(qs[start:end]), nil
}

// avgRange is the run [start, end) of AVG's client idx of n over q queues.
func avgRange(idx, n, q int) (start, end int) {
	size, mod := q/n, q%n
	if idx < mod {
		return idx * (size + 1), (idx + 1) * (size + 1)
	}
	start = idx*size + mod
	return start, start + size
}

// ByCircle is AVG_BY_CIRCLE (AllocateMessageQueueAveragelyByCircle): the
// i-th sorted queue goes to the (i mod n)-th sorted client.
var ByCircle Strategy = byCircle{}

type byCircle struct{}

func (byCircle) Name() string { return NameByCircle }

func (byCircle) Allocate(_, clientID string, clients []string, queues []Queue) ([]Queue, error) {
	cs, qs, idx, err := prepare(clientID, clients, queues)
	if err != nil {
		return nil, err
	}
	out := make([]Queue, 0, (len(qs)+len(cs)-1)/len(cs))
	for i := idx; i < len(qs); i += len(cs) {
		out = append(out, qs[i])
	}
	return out, nil
}

// ByConfig is CONFIG (AllocateMessageQueueByConfig): every client of the
// group gets the same fixed queues, whatever the queues offered. It does
// not partition.
func ByConfig(queues []Queue) Strategy { return byConfig{sortQueues(queues)} }

type byConfig struct{ queues []Queue }

func (byConfig) Name() string { return NameConfig }

func (s byConfig) Allocate(_, clientID string, clients []string, _ []Queue) ([]Queue, error) {
	if _, _, _, err := prepare(clientID, clients, nil); err != nil {
		return nil, err
	}
	return slices.Clone(s.queues), nil
}

// MachineRoom is MACHINE_ROOM (AllocateMessageQueueByMachineRoom): only
// queues of brokers named "room@name" whose room is one of rooms are
// assigned, spread over all clients as RocketMQ does: each client takes
// a run of p/n queues (p the queues of those rooms) and the first p mod n
// clients one more from the tail. Queues of other brokers go to nobody.
func MachineRoom(rooms []string) Strategy {
	set := make(map[string]bool, len(rooms))
	for _, r := range rooms {
		set[r] = true
	}
	return machineRoom{set}
}

type machineRoom struct{ rooms map[string]bool }

func (machineRoom) Name() string { return NameMachineRoom }

// BrokerRoom splits a broker name "room@name" into its machine room; ok
// is false unless the name holds exactly one '@' with text after it.
func BrokerRoom(brokerName string) (room string, ok bool) {
	room, name, found := strings.Cut(brokerName, "@")
	if !found || name == "" || strings.Contains(name, "@") {
		return "", false
	}
	return room, true
}

func (s machineRoom) Allocate(_, clientID string, clients []string, queues []Queue) ([]Queue, error) {
	cs, qs, idx, err := prepare(clientID, clients, queues)
	if err != nil {
		return nil, err
	}
	mine := qs[:0]
	for _, q := range qs {
		if room, ok := BrokerRoom(q.BrokerName); ok && s.rooms[room] {
			mine = append(mine, q)
		}
	}
	n := len(cs)
	per, rem := len(mine)/n, len(mine)%n
	out := append([]Queue{}, mine[idx*per:idx*per+per]...)
	if idx < rem {
		out = append(out, mine[per*n+idx])
	}
	return out, nil
}

// MachineRoomNearby is MACHINE_ROOM_NEARBY (AllocateMachineRoomNearby),
// named "MACHINE_ROOM_NEARBY-" + inner.Name(). brokerRoom gives a queue's
// machine room and clientRoom a client's. The queues of a room with
// consumers go to that room's consumers, the queues of a room without
// consumers to all consumers, both by inner. An empty room from either
// resolver is ErrNoMachineRoom. A nil argument panics.
func MachineRoomNearby(inner Strategy, brokerRoom func(Queue) string, clientRoom func(clientID string) string) Strategy {
	if inner == nil || brokerRoom == nil || clientRoom == nil {
		panic("allocate: MachineRoomNearby needs a strategy and both resolvers")
	}
	return nearby{inner, brokerRoom, clientRoom}
}

type nearby struct {
	inner      Strategy
	brokerRoom func(Queue) string
	clientRoom func(string) string
}

func (s nearby) Name() string { return NameMachineRoomNearby + "-" + s.inner.Name() }

func (s nearby) Allocate(group, clientID string, clients []string, queues []Queue) ([]Queue, error) {
	cs, qs, _, err := prepare(clientID, clients, queues)
	if err != nil {
		return nil, err
	}
	queueRooms := map[string][]Queue{}
	for _, q := range qs {
		r := s.brokerRoom(q)
		if r == "" {
			return nil, errors.Join(ErrNoMachineRoom, errors.New("allocate: for queue "+q.String()))
		}
		queueRooms[r] = append(queueRooms[r], q)
	}
	clientRooms := map[string][]string{}
	for _, c := range cs {
		r := s.clientRoom(c)
		if r == "" {
			return nil, errors.Join(ErrNoMachineRoom, errors.New("allocate: for client "+c))
		}
		clientRooms[r] = append(clientRooms[r], c)
	}
	own := s.clientRoom(clientID)
	var out []Queue
	if mine := queueRooms[own]; len(mine) > 0 {
		got, err := s.inner.Allocate(group, clientID, clientRooms[own], mine)
		if err != nil {
			return nil, err
		}
		out = append(out, got...)
	}
	for room, qs := range queueRooms {
		if room == own || clientRooms[room] != nil {
			continue
		}
		got, err := s.inner.Allocate(group, clientID, cs, qs)
		if err != nil {
			return nil, err
		}
		out = append(out, got...)
	}
	return sortQueues(out), nil
}
