package broker

// The assignment service: which queues of a topic one consumer of a group
// should pull, decided at the broker for RocketMQ 5's QUERY_ASSIGNMENT and
// the `allocate` admin command alike.
//
// The handler lives here, not beside the plugins in internal/server,
// because everything it needs but one thing is the broker's own: topics,
// the live consumers, the group configuration. The one thing, the allocate
// plugin serving a group, reaches it through Options.GroupAllocator, so
// this package stays free of plugins and the choice is made per request
// (a reload or a changed group strategy counts at the next query).

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/rmq-go/rmq/core/allocate"
	"github.com/rmq-go/rmq/core/remoting"
)

// Errors of Assign.
var (
	// ErrNoTopic is returned for a topic this broker does not hold.
	ErrNoTopic = errors.New("broker: no such topic")
	// ErrNotConsumer is returned when the asking client is not a live
	// consumer of the group (or the group has none).
	ErrNotConsumer = errors.New("broker: not a live consumer")
	// ErrAllocatorFailed is returned when the group's allocator failed and
	// the client has no previous assignment to keep.
	ErrAllocatorFailed = errors.New("broker: allocator failed")
)

// Where an assignment's strategy came from (Assignment.Source), in the
// order Assign consults them.
const (
	SourcePlugin        = "plugin"         // an allocate plugin configured for the group
	SourceGroup         = "group"          // the group's allocateStrategy
	SourceDefaultPlugin = "default-plugin" // the allocate plugin of every group
	SourceRequest       = "request"        // the strategy the client named
	SourceDefault       = "default"        // AVG
	SourceBroadcasting  = "broadcasting"   // every consumer gets every queue
)

// maxRemembered bounds the assignments kept for failing allocators.
const maxRemembered = 4096

// maxGroupLen bounds a consumer group name, as RocketMQ does.
const maxGroupLen = 255

// AssignmentQuery asks for one consumer's queues of a topic.
type AssignmentQuery struct {
	Group, Topic, ClientID string
	// Strategy is the client's own strategy name; it counts only when
	// neither a plugin nor the group's configuration decides.
	Strategy string
	// Broadcasting gives the client every readable queue.
	Broadcasting bool
}

// Assignment is the answer of Assign and of the allocate admin command.
type Assignment struct {
	Group    string   `json:"group"`
	Topic    string   `json:"topic"`
	ClientID string   `json:"clientId"`
	Strategy string   `json:"strategy"` // "AVG", "plugin sticky", …; "" when broadcasting
	Source   string   `json:"source"`   // Source* constant
	Clients  []string `json:"clients"`  // the group's live consumers, sorted
	Queues   []Queue  `json:"queues"`   // assigned to ClientID, sorted
	// Error is set when a plugin failed: Queues is then the client's
	// previous assignment, which a failing allocator keeps.
	Error string `json:"error,omitempty"`
}

type assignKey struct{ group, topic, clientID string }

// assignments remembers each client's last good assignment.
type assignments struct {
	mu struct {
		sync.Mutex
		last map[assignKey][]Queue
	}
}

func (a *assignments) get(k assignKey) ([]Queue, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	q, ok := a.mu.last[k]
	return q, ok
}

func (a *assignments) put(k assignKey, qs []Queue) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.mu.last == nil || len(a.mu.last) >= maxRemembered {
		a.mu.last = map[assignKey][]Queue{}
	}
	a.mu.last[k] = qs
}

// strategy picks a group's allocation strategy: a plugin configured for
// the group, else the group's allocateStrategy, else the default plugin,
// else requested if it is a built-in name, else AVG. Exactly one of
// plugin and builtin is set. Nothing is cached, so a change counts at
// the next call.
func (b *Broker) strategy(group, requested string) (plugin Allocator, builtin allocate.Strategy, name, source string) {
	var pname string
	var own bool
	if b.opts.GroupAllocator != nil {
		plugin, pname, own = b.opts.GroupAllocator(group)
	}
	if plugin != nil && own {
		return plugin, nil, pname, SourcePlugin
	}
	if gc, _ := b.groupConfig(group); gc.AllocateStrategy != "" {
		if s, ok := allocate.ByName(gc.AllocateStrategy); ok {
			return nil, s, s.Name(), SourceGroup
		}
	}
	if plugin != nil {
		return plugin, nil, pname, SourceDefaultPlugin
	}
	if s, ok := allocate.ByName(requested); ok {
		return nil, s, s.Name(), SourceRequest
	}
	return nil, allocate.Averagely, allocate.NameAveragely, SourceDefault
}

// readableQueues lists a topic's queues on this broker, none when the
// topic is not readable.
func (b *Broker) readableQueues(topic string) ([]Queue, bool) {
	tc, ok := b.topics.get(topic)
	if !ok {
		return nil, false
	}
	qs := []Queue{}
	if tc.Perm&remoting.PermRead == 0 {
		return qs, true
	}
	for i := range tc.ReadQueueNums {
		qs = append(qs, Queue{Topic: topic, BrokerName: b.opts.BrokerName, QueueID: int32(i)})
	}
	return qs, true
}

// Assign returns the queues of topic on this broker that q.ClientID
// should consume, chosen as strategy describes. A plugin that fails
// leaves the client its previous assignment (ErrAllocatorFailed when
// there is none).
func (b *Broker) Assign(ctx context.Context, q AssignmentQuery) (Assignment, error) {
	a := Assignment{Group: q.Group, Topic: q.Topic, ClientID: q.ClientID, Clients: []string{}, Queues: []Queue{}}
	queues, ok := b.readableQueues(q.Topic)
	if !ok {
		return a, fmt.Errorf("%w: topic %s does not exist", ErrNoTopic, q.Topic)
	}
	if q.Broadcasting {
		a.Source, a.Queues = SourceBroadcasting, queues
		return a, nil
	}
	clients, _ := b.clients.consumerIDs(q.Group)
	if len(clients) == 0 {
		return a, fmt.Errorf("%w: consumer group %s has no live consumers", ErrNotConsumer, q.Group)
	}
	a.Clients = clients
	if _, member := slices.BinarySearch(clients, q.ClientID); !member {
		return a, fmt.Errorf("%w: %s is not a live consumer of group %s (its consumers: %s)", ErrNotConsumer, q.ClientID, q.Group, strings.Join(clients, ", "))
	}
	plugin, builtin, name, source := b.strategy(q.Group, q.Strategy)
	a.Strategy, a.Source = name, source
	key := assignKey{q.Group, q.Topic, q.ClientID}
	var err error
	if builtin != nil {
		a.Queues, err = builtin.Allocate(q.Group, q.ClientID, clients, queues)
	} else {
		var idx []int
		if idx, err = plugin.Allocate(ctx, q.Group, q.ClientID, clients, queues); err == nil {
			a.Queues = make([]Queue, 0, len(idx))
			for _, i := range idx {
				if i < 0 || i >= len(queues) {
					err = fmt.Errorf("queue index %d out of range [0, %d)", i, len(queues))
					break
				}
				a.Queues = append(a.Queues, queues[i])
			}
		}
	}
	if err != nil {
		prev, ok := b.assigned.get(key)
		if !ok {
			return a, fmt.Errorf("%w: %s for %s, which has no previous assignment to keep: %w", ErrAllocatorFailed, name, q.ClientID, err)
		}
		b.log.Warn("allocator failed; the previous assignment stands", "group", q.Group, "topic", q.Topic, "client", q.ClientID, "strategy", name, "err", err)
		a.Queues, a.Error = prev, err.Error()
		return a, nil
	}
	b.assigned.put(key, a.Queues)
	return a, nil
}

// handleQueryAssignment serves QUERY_ASSIGNMENT. As in RocketMQ, a client
// that is not (or not yet) a live consumer of the group gets an empty
// assignment; unlike RocketMQ, which answers an unknown topic with no
// assignment at all, this broker says TOPIC_NOT_EXIST.
func (b *Broker) handleQueryAssignment(c *remoting.Conn, req *remoting.Command) *remoting.Command {
	var body allocate.QueryAssignmentRequest
	if err := json.Unmarshal(req.Body, &body); err != nil {
		return response(req, remoting.SystemError, "query assignment: bad body: %v", err)
	}
	if err := ValidateTopic(body.Topic); err != nil {
		return response(req, remoting.SystemError, "query assignment: %v", err)
	}
	if body.ConsumerGroup == "" || len(body.ConsumerGroup) > maxGroupLen {
		return response(req, remoting.SystemError, "query assignment: consumerGroup must hold 1 to %d characters", maxGroupLen)
	}
	var broadcasting bool
	switch body.MessageModel {
	case allocate.Clustering:
	case allocate.Broadcasting:
		broadcasting = true
	default:
		return response(req, remoting.SystemError, "query assignment: messageModel must be %s or %s", allocate.Clustering, allocate.Broadcasting)
	}
	ctx, cancel := context.WithTimeout(context.Background(), adminTimeout)
	defer cancel()
	a, err := b.Assign(ctx, AssignmentQuery{Group: body.ConsumerGroup, Topic: body.Topic, ClientID: body.ClientID, Strategy: body.StrategyName, Broadcasting: broadcasting})
	switch {
	case errors.Is(err, ErrNoTopic):
		return response(req, remoting.TopicNotExist, "query assignment: topic %s does not exist on broker %s", body.Topic, b.opts.BrokerName)
	case errors.Is(err, ErrNotConsumer):
		a.Queues = nil // an empty assignment: the client drops its queues
	case err != nil:
		return response(req, remoting.SystemError, "query assignment: %v", err)
	}
	out := allocate.QueryAssignmentResponse{MessageQueueAssignments: make([]allocate.QueueAssignment, len(a.Queues))}
	for i, q := range a.Queues {
		out.MessageQueueAssignments[i] = allocate.QueueAssignment{MessageQueue: q, Mode: allocate.ModePull}
	}
	resp := remoting.NewResponse(req, remoting.Success, "")
	resp.Body, _ = json.Marshal(out)
	return resp
}

// GroupStrategy is the answer of the consumers.strategy admin command.
type GroupStrategy struct {
	Group string `json:"group"`
	// Configured is the group's allocateStrategy; "" when unset.
	Configured string `json:"configured"`
	// Effective is the strategy QUERY_ASSIGNMENT uses for the group when
	// the client names none, and Source why.
	Effective string `json:"effective"`
	Source    string `json:"source"`
}

// StrategyArgs are the arguments of the consumers.strategy admin command.
type StrategyArgs struct {
	Group    string `json:"group"`
	Strategy string `json:"strategy,omitempty"` // set it (AVG, AVG_BY_CIRCLE, CONSISTENT_HASH)
	Clear    bool   `json:"clear,omitempty"`    // unset it
}

// SetGroupStrategy sets a group's allocateStrategy durably; "" unsets it.
func (a Admin) SetGroupStrategy(group, strategy string) error {
	b := a.b
	if group == "" {
		return errors.New("broker: a consumer group is required")
	}
	gc, _ := b.groupConfig(group)
	gc.GroupName, gc.AllocateStrategy = group, strategy
	return b.PutGroupConfig(gc)
}

// GroupStrategy reports a group's configured and effective strategies.
func (v View) GroupStrategy(group string) GroupStrategy {
	b := v.b
	gc, _ := b.groupConfig(group)
	_, _, name, source := b.strategy(group, "")
	return GroupStrategy{Group: group, Configured: gc.AllocateStrategy, Effective: name, Source: source}
}

func (b *Broker) handleStrategyAdmin(_ context.Context, args json.RawMessage) (any, error) {
	var a StrategyArgs
	if err := decodeArgs(args, &a); err != nil {
		return nil, err
	}
	if a.Group == "" {
		return nil, errors.New("consumers.strategy: group required")
	}
	if a.Clear && a.Strategy != "" {
		return nil, errors.New("consumers.strategy: give a strategy or clear, not both")
	}
	if a.Clear || a.Strategy != "" {
		if err := b.Admin().SetGroupStrategy(a.Group, a.Strategy); err != nil {
			return nil, err
		}
	}
	return b.View().GroupStrategy(a.Group), nil
}

// checkGroupStrategy validates and canonicalizes gc.AllocateStrategy.
func checkGroupStrategy(gc *SubscriptionGroupConfig) error {
	if gc.AllocateStrategy == "" {
		return nil
	}
	s, ok := allocate.ByName(gc.AllocateStrategy)
	if !ok {
		return fmt.Errorf("broker: group %s: allocateStrategy %q is not one of %s", gc.GroupName, gc.AllocateStrategy, strings.Join(allocate.Names(), ", "))
	}
	gc.AllocateStrategy = s.Name()
	return nil
}

// Allocate makes the broker an Allocator for in-process callers: it runs
// the strategy Assign would choose for group (with no strategy named by
// the client) over the given clients and queues, returning indices into
// queues. Unlike Assign it does not keep a failing plugin's previous
// assignment.
func (b *Broker) Allocate(ctx context.Context, group, clientID string, clientIDs []string, queues []Queue) ([]int, error) {
	plugin, builtin, _, _ := b.strategy(group, "")
	if plugin != nil {
		return plugin.Allocate(ctx, group, clientID, clientIDs, queues)
	}
	got, err := builtin.Allocate(group, clientID, clientIDs, queues)
	if err != nil {
		return nil, err
	}
	at := make(map[Queue]int, len(queues))
	for i := len(queues) - 1; i >= 0; i-- {
		at[queues[i]] = i
	}
	idx := make([]int, len(got))
	for i, q := range got {
		idx[i] = at[q]
	}
	return idx, nil
}
