package client

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/rmq-go/rmq/core/message"
	"github.com/rmq-go/rmq/core/remoting"
)

// MessageModel is how a consumer group shares a topic.
type MessageModel int

const (
	// Clustering gives each message to one member of the group; offsets
	// are kept by the broker.
	Clustering MessageModel = iota
	// Broadcasting gives each message to every member; each keeps its
	// offsets in a local file.
	Broadcasting
)

func (m MessageModel) String() string {
	if m == Broadcasting {
		return "BROADCASTING"
	}
	return "CLUSTERING"
}

// ConsumeFrom is where a consumer starts on a queue its group has no
// committed offset for.
type ConsumeFrom int

const (
	// ConsumeFromLastOffset starts at the end: only new messages.
	ConsumeFromLastOffset ConsumeFrom = iota
	// ConsumeFromFirstOffset starts at the oldest stored message.
	ConsumeFromFirstOffset
	// ConsumeFromTimestamp starts at the first message stored at or after
	// ConsumerOptions.ConsumeTimestamp.
	ConsumeFromTimestamp
)

func (c ConsumeFrom) String() string {
	switch c {
	case ConsumeFromFirstOffset:
		return "CONSUME_FROM_FIRST_OFFSET"
	case ConsumeFromTimestamp:
		return "CONSUME_FROM_TIMESTAMP"
	}
	return "CONSUME_FROM_LAST_OFFSET"
}

// Selector picks the messages of a subscription: a tag expression
// ("*", "a || b") or an SQL92 expression over properties.
type Selector struct {
	// Type is "TAG" (the default when empty) or "SQL92", or an expression
	// type a broker plugin serves.
	Type string
	// Expression is the tag list or the SQL92 condition; "" means all.
	Expression string
}

// Expression types.
const (
	ExpressionTag   = "TAG"
	ExpressionSQL92 = "SQL92"
)

// subscription is one topic a consumer reads.
type subscription struct {
	topic string
	sel   Selector
	tags  []string // the tag set of a TAG expression; empty means all
	data  remoting.SubscriptionData
}

// newSubscription parses sel for topic.
func newSubscription(topic string, sel Selector) (*subscription, error) {
	if topic == "" {
		return nil, errors.New("client: subscription with an empty topic")
	}
	if sel.Type == "" {
		sel.Type = ExpressionTag
	}
	s := &subscription{topic: topic, sel: sel}
	d := remoting.SubscriptionData{Topic: topic, SubString: sel.Expression, ExpressionType: sel.Type, TagsSet: []string{}, CodeSet: []string{}, SubVersion: time.Now().UnixNano()}
	if sel.Type == ExpressionTag {
		expr := strings.TrimSpace(sel.Expression)
		if expr == "" || expr == "*" {
			d.SubString = "*"
		} else {
			for _, t := range strings.Split(expr, "||") {
				if t = strings.TrimSpace(t); t != "" {
					s.tags = append(s.tags, t)
				}
			}
			if len(s.tags) == 0 {
				return nil, fmt.Errorf("client: tag expression %q names no tag", sel.Expression)
			}
			slices.Sort(s.tags)
			s.tags = slices.Compact(s.tags)
			d.TagsSet = slices.Clone(s.tags)
			for _, t := range s.tags {
				d.CodeSet = append(d.CodeSet, strconv.FormatInt(message.TagHash(t), 10))
			}
		}
	}
	s.data = d
	return s, nil
}

// matches reports whether the client-side tag check passes msg: the
// broker filters too, so this only guards against a broker that
// over-delivers.
func (s *subscription) matches(msg *MessageExt) bool {
	if len(s.tags) == 0 {
		return true
	}
	_, ok := slices.BinarySearch(s.tags, msg.Tag())
	return ok
}

// retryTopic is the retry topic of a consumer group.
func retryTopic(group string) string { return remoting.RetryGroupTopicPrefix + group }

// ConsumerOptions configures a push or lite pull consumer. The zero value
// of each field means its default, except Group and Client.NameServers.
type ConsumerOptions struct {
	Client ClientOptions
	// Group is the consumer group. Required.
	Group string
	// Model is Clustering (default) or Broadcasting.
	Model MessageModel
	// ConsumeFrom is where a queue with no committed offset starts;
	// default ConsumeFromLastOffset.
	ConsumeFrom ConsumeFrom
	// ConsumeTimestamp is the start for ConsumeFromTimestamp; default half
	// an hour ago.
	ConsumeTimestamp time.Time
	// Strategy allocates queues among the group's members when the
	// client allocates them itself; default AVG.
	Strategy AllocateStrategy
	// ClientAllocation makes the client allocate queues itself even when
	// a broker offers to (QUERY_ASSIGNMENT). By default the broker's
	// assignment, under the strategy configured for the group at the
	// broker, is used when the broker serves it.
	ClientAllocation bool
	// PullBatchSize is the most messages one pull asks for; default 32.
	PullBatchSize int
	// ConsumeBatchSize is the most messages handed to one handler call;
	// default 1.
	ConsumeBatchSize int
	// ConsumeGoroutines is how many handler calls of a concurrent
	// consumer run at once; default 20.
	ConsumeGoroutines int
	// MaxReconsumeTimes is how often a message is retried before it goes
	// to the dead-letter topic; default 16.
	MaxReconsumeTimes int
	// ConsumeTimeout is how long a message may stay in a handler before
	// the expiry sweep sends it back for retry; default 15 min.
	ConsumeTimeout time.Duration
	// SuspendTime is how long an orderly queue pauses after its handler
	// asked to suspend; default 1 s.
	SuspendTime time.Duration
	// RebalanceInterval is how often queues are re-allocated; default 20 s.
	RebalanceInterval time.Duration
	// PersistInterval is how often committed offsets are sent to the
	// broker; default 5 s.
	PersistInterval time.Duration
	// PullThresholdForQueue, PullThresholdSizeForQueue (MiB),
	// PullThresholdForTopic and PullThresholdSizeForTopic (MiB) bound the
	// messages cached per queue and per topic before pulls wait; defaults
	// 1000, 100, unlimited, unlimited.
	PullThresholdForQueue     int
	PullThresholdSizeForQueue int
	PullThresholdForTopic     int
	PullThresholdSizeForTopic int
	// MaxSpan bounds the offset span of a concurrent queue's cached
	// messages; default 2000.
	MaxSpan int
	// OffsetDir is where a broadcasting consumer keeps its offsets;
	// default $HOME/.rmq-go/client.
	OffsetDir string
}

// Defaults of ConsumerOptions.
const (
	DefaultPullBatchSize     = 32
	DefaultConsumeGoroutines = 20
	DefaultMaxReconsumeTimes = 16
	DefaultConsumeTimeout    = 15 * time.Minute
	DefaultSuspendTime       = time.Second
	DefaultRebalanceInterval = 20 * time.Second
	DefaultPersistInterval   = 5 * time.Second
)

// withDefaults returns a copy of o with defaults filled in, or every
// problem found.
func (o ConsumerOptions) withDefaults() (ConsumerOptions, error) {
	var problems []string
	if o.Group == "" {
		problems = append(problems, "Group is empty")
	}
	if strings.HasPrefix(o.Group, "%") {
		problems = append(problems, fmt.Sprintf("Group %q starts with %%", o.Group))
	}
	for _, f := range []struct {
		name string
		v    int
	}{{"PullBatchSize", o.PullBatchSize}, {"ConsumeBatchSize", o.ConsumeBatchSize}, {"ConsumeGoroutines", o.ConsumeGoroutines},
		{"MaxReconsumeTimes", o.MaxReconsumeTimes}, {"PullThresholdForQueue", o.PullThresholdForQueue}, {"PullThresholdSizeForQueue", o.PullThresholdSizeForQueue},
		{"PullThresholdForTopic", o.PullThresholdForTopic}, {"PullThresholdSizeForTopic", o.PullThresholdSizeForTopic}, {"MaxSpan", o.MaxSpan}} {
		if f.v < 0 {
			problems = append(problems, fmt.Sprintf("%s %d is negative", f.name, f.v))
		}
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"ConsumeTimeout", o.ConsumeTimeout}, {"SuspendTime", o.SuspendTime}, {"RebalanceInterval", o.RebalanceInterval}, {"PersistInterval", o.PersistInterval}} {
		if d.v < 0 {
			problems = append(problems, fmt.Sprintf("%s %v is negative", d.name, d.v))
		}
	}
	if o.PullBatchSize > 1024 {
		problems = append(problems, fmt.Sprintf("PullBatchSize %d is over 1024", o.PullBatchSize))
	}
	if len(problems) > 0 {
		return o, errors.New("client: invalid ConsumerOptions: " + strings.Join(problems, "; "))
	}
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	def(&o.PullBatchSize, DefaultPullBatchSize)
	def(&o.ConsumeBatchSize, 1)
	def(&o.ConsumeGoroutines, DefaultConsumeGoroutines)
	def(&o.MaxReconsumeTimes, DefaultMaxReconsumeTimes)
	def(&o.PullThresholdForQueue, 1000)
	def(&o.PullThresholdSizeForQueue, 100)
	def(&o.MaxSpan, 2000)
	if o.PullThresholdForTopic == 0 {
		o.PullThresholdForTopic = -1
	}
	if o.PullThresholdSizeForTopic == 0 {
		o.PullThresholdSizeForTopic = -1
	}
	defd := func(v *time.Duration, d time.Duration) {
		if *v == 0 {
			*v = d
		}
	}
	defd(&o.ConsumeTimeout, DefaultConsumeTimeout)
	defd(&o.SuspendTime, DefaultSuspendTime)
	defd(&o.RebalanceInterval, DefaultRebalanceInterval)
	defd(&o.PersistInterval, DefaultPersistInterval)
	if o.ConsumeTimestamp.IsZero() {
		o.ConsumeTimestamp = time.Now().Add(-30 * time.Minute)
	}
	if o.Strategy == nil {
		o.Strategy = defaultStrategy()
	}
	if o.OffsetDir == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			home = os.TempDir()
		}
		o.OffsetDir = filepath.Join(home, ".rmq-go", "client")
	}
	return o, nil
}

// consumerCore is what push and lite pull consumers share: the instance,
// subscriptions, offsets and the rebalance loop.
type consumerCore struct {
	opts    ConsumerOptions
	in      *instance
	offsets offsetStore
	kind    string // CONSUME_PASSIVELY or CONSUME_ACTIVELY
	// startTime is when the consumer started (startCore), for running
	// info.
	startTime time.Time
	rebal     *rebalancer
	quit      chan struct{}
	wg        sync.WaitGroup
	kick      chan struct{} // a rebalance is wanted now
	stopOnce  sync.Once

	mu struct {
		sync.Mutex
		subs map[string]*subscription // by topic
	}
}

// ClientID returns the id brokers know the consumer by (IP@InstanceName);
// it is set by Start.
func (c *consumerCore) ClientID() string {
	if c.in == nil {
		return ""
	}
	return c.in.id
}

// subscriptions returns the current subscriptions.
func (c *consumerCore) subscriptions() []*subscription {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]*subscription, 0, len(c.mu.subs))
	for _, s := range c.mu.subs {
		out = append(out, s)
	}
	slices.SortFunc(out, func(a, b *subscription) int { return strings.Compare(a.topic, b.topic) })
	return out
}

func (c *consumerCore) subscription(topic string) *subscription {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mu.subs[topic]
}

// heartbeat implements consumerMember.
func (c *consumerCore) heartbeat() remoting.ConsumerData {
	cd := remoting.ConsumerData{GroupName: c.opts.Group, ConsumeType: c.kind, MessageModel: c.opts.Model.String(),
		ConsumeFromWhere: c.opts.ConsumeFrom.String(), SubscriptionDataSet: []remoting.SubscriptionData{}}
	for _, s := range c.subscriptions() {
		cd.SubscriptionDataSet = append(cd.SubscriptionDataSet, s.data)
	}
	return cd
}

// topics implements consumerMember.
func (c *consumerCore) topics() []string {
	var out []string
	for _, s := range c.subscriptions() {
		out = append(out, s.topic)
	}
	return out
}

// rebalanceSoon implements consumerMember.
func (c *consumerCore) rebalanceSoon() {
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

// goLoop runs fn every interval, and at once when kick fires, until the
// consumer stops.
func (c *consumerCore) goLoop(interval time.Duration, kick <-chan struct{}, fn func()) {
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-c.quit:
				return
			case <-t.C:
			case <-kick:
			}
			fn()
		}
	}()
}

// startCore acquires the instance, loads offsets, registers the group and
// sends the first heartbeat.
func (c *consumerCore) startCore(member consumerMember) error {
	c.startTime = time.Now()
	in, err := acquireInstance(c.opts.Client)
	if err != nil {
		return err
	}
	c.in = in
	if c.opts.Model == Broadcasting {
		c.offsets = newLocalOffsetStore(c.opts.OffsetDir, in.id, c.opts.Group)
	} else {
		c.offsets = newRemoteOffsetStore(c.opts.Group, in)
	}
	if err := c.offsets.load(); err != nil {
		in.release()
		return fmt.Errorf("client: loading offsets of %s: %w", c.opts.Group, err)
	}
	ctx, cancel := in.ctx()
	defer cancel()
	for _, s := range c.subscriptions() {
		if _, err := in.updateRoute(ctx, s.topic); err != nil && !strings.HasPrefix(s.topic, remoting.RetryGroupTopicPrefix) {
			in.release()
			return fmt.Errorf("client: route of %s: %w", s.topic, err)
		}
	}
	if err := in.registerConsumer(c.opts.Group, member); err != nil {
		in.release()
		return err
	}
	if err := in.heartbeat(); err != nil {
		in.log.Warn("first heartbeat failed; the next one retries", "group", c.opts.Group, "err", err)
	}
	return nil
}

// releaseOffset commits q's offset and forgets it, for a queue given up.
func (c *consumerCore) releaseOffset(ctx context.Context, q MessageQueue) {
	if err := c.offsets.persist(ctx, []MessageQueue{q}); err != nil {
		c.in.log.Warn("committing a dropped queue's offset failed", "queue", q, "err", err)
	}
	c.offsets.remove(q)
	c.in.log.Debug("queue given up", "group", c.opts.Group, "queue", q)
}

// stopCore unregisters and releases the instance.
func (c *consumerCore) stopCore(ctx context.Context) error {
	err := c.in.unregister("", c.opts.Group)
	c.in.release()
	return err
}
