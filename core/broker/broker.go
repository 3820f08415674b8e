package broker

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rmq-go/rmq/core/remoting"
	"github.com/rmq-go/rmq/core/store"
)

// Defaults for Options fields left zero.
const (
	DefaultBrokerName        = "broker-a"
	DefaultClusterName       = "DefaultCluster"
	DefaultTopicQueueNums    = 8
	DefaultMaxMessageSize    = 4 << 20
	DefaultRegisterInterval  = 30 * time.Second
	DefaultClientExpiry      = 120 * time.Second
	DefaultMaxPullSuspend    = 25 * time.Second
	DefaultPullMaxMsgs       = 32
	DefaultPullMaxBytes      = 1 << 20
	DefaultPullScanUnits     = 800
	DefaultFilterCacheSize   = 4096
	DefaultFilterCacheBytes  = 32 << 20
	DefaultMaxBatchMessages  = 10000
	DefaultMaxHeldPulls      = 4096
	DefaultMaxFilterExpr     = 16 << 10
	DefaultMaxTopics         = 10000
	DefaultMaxGroups         = 10000
	DefaultMaxSubscriptions  = 1000
	DefaultRegisterTimeout   = 3 * time.Second
	defaultBrokerVersion     = 409
	defaultHeartbeatSweepGap = 10 * time.Second
)

// Options configures a Broker. Zero values mean the documented default.
// The yaml tags name each field in the broker's config file (at its top
// level); cfg:"size" marks sizes written with a unit ("4MiB") and
// cfg:"not" a switch the file states the other way round
// (autoCreateTopic: false sets DisableAutoCreateTopic).
type Options struct {
	// Store holds the broker's messages, offsets and config. Required; the
	// broker does not close it.
	Store *store.Store `yaml:"-"`
	// BrokerName names this broker in routes. Default "broker-a".
	BrokerName string `yaml:"brokerName"`
	// ReplicaID, when above 0, makes the broker a replica of a replicated
	// broker set (replica.go): it registers under BrokerName with this
	// brokerId, serves what reads the store (pulls, offsets, queries),
	// refuses every write, and runs none of the services that write. Its
	// store is kept by the set's leader through replication.
	ReplicaID int64 `yaml:"-"`
	// Leader says where a replicated set's leader is ("node n1, raft
	// address 10.0.0.1:7000"), or "" while none is known; a member that
	// refuses a write because it does not lead names it in the remark.
	// Nil outside a replicated set.
	Leader func() string `yaml:"-"`
	// ClusterName is the cluster this broker belongs to. Default
	// "DefaultCluster".
	ClusterName string `yaml:"clusterName"`
	// AdvertiseAddr is the address clients dial, put in routes and in
	// message ids. Default: the listener's address (an unspecified IP is
	// replaced with 127.0.0.1).
	AdvertiseAddr string `yaml:"-"`
	// NameServers are registered with at start, every RegisterInterval and
	// whenever a topic changes.
	NameServers []string `yaml:"-"`
	// GRPCAddr is the broker's advertised RocketMQ 5 (gRPC) endpoint, if
	// it serves one. It is registered with the name servers beside the
	// broker's address, so the gRPC endpoints of the other broker sets
	// can route RocketMQ 5 clients here (View.NameServerRoute).
	GRPCAddr string `yaml:"-"`
	// AccessKey and SecretKey are the broker's own account (core/acl):
	// with AccessKey set, the broker signs its registrations with the name
	// servers, which need an admin account when they check access. The
	// embedded name server of its own process needs none.
	AccessKey string `yaml:"accessKey"`
	SecretKey string `yaml:"secretKey"`
	// RegisterInterval is the re-registration period. Default 30 s.
	RegisterInterval time.Duration `yaml:"registerInterval"`
	// DisableAutoCreateTopic refuses sends to unknown topics with
	// TOPIC_NOT_EXIST instead of creating them. Auto-creation is on by
	// default.
	DisableAutoCreateTopic bool `yaml:"autoCreateTopic" cfg:"not"`
	// DisableAutoCreateGroup lets only consumer groups with a subscription
	// group config (Groups, UPDATE_AND_CREATE_SUBSCRIPTIONGROUP) register
	// consumers by heartbeat, pull, commit offsets and send messages back;
	// any other group is answered SUBSCRIPTION_GROUP_NOT_EXIST. Producer
	// groups need no config. By default any valid group name may consume,
	// as with RocketMQ's autoCreateSubscriptionGroup: true.
	DisableAutoCreateGroup bool `yaml:"autoCreateSubscriptionGroup" cfg:"not"`
	// DefaultTopicQueueNums is the queue count of TBW102, the template of
	// auto-created topics, and of Topics that name none. Default 8.
	DefaultTopicQueueNums int `yaml:"defaultTopicQueueNums"`
	// Topics are created, or updated to this configuration, by New: before
	// the broker first registers with the name servers.
	Topics []TopicOptions `yaml:"topics"`
	// Groups are consumer groups configured by New, as
	// UPDATE_AND_CREATE_SUBSCRIPTIONGROUP would: created, or updated to
	// GroupOptions' fields (their defaults where left zero); the fields
	// GroupOptions lacks, such as an allocation strategy set by the admin
	// command, stay as stored.
	Groups []GroupOptions `yaml:"groups"`
	// MaxTopics bounds the topic table, retry and dead-letter topics
	// included: creating a topic beyond it (UPDATE_AND_CREATE_TOPIC, a
	// send's auto-creation, a group's retry or dead-letter topic) is
	// refused, naming the limit; changing an existing topic never is, nor
	// creating the broker's own fixed topics. Default 10,000.
	MaxTopics int `yaml:"maxTopics"`
	// MaxGroups bounds the producer and consumer groups tracked from
	// heartbeats (a name used for both counts twice): a heartbeat's group
	// beyond it is refused, naming the limit, while groups already tracked
	// keep heartbeating. Default 10,000.
	MaxGroups int `yaml:"maxGroups"`
	// MaxSubscriptionsPerGroup bounds the topics one consumer group
	// subscribes to in a heartbeat; a group over it is refused. Default
	// 1,000. A heartbeat names at most MaxHeartbeatGroups consumer groups
	// and as many producer groups.
	MaxSubscriptionsPerGroup int `yaml:"maxSubscriptionsPerGroup"`
	// MaxLiteTopics bounds the lite topics (of every LITE topic) whose
	// queues hold messages: a message that would create one more is
	// refused (LITE_TOPIC_QUOTA_EXCEEDED to a RocketMQ 5 client), naming
	// the limit. A lite topic whose messages retention removed no longer
	// counts. Default 100,000.
	MaxLiteTopics int `yaml:"maxLiteTopics"`
	// LiteExpiryInterval is how often expired lite topics are deleted
	// (TopicConfig.LiteExpiration). Default a minute; tests shorten it.
	LiteExpiryInterval time.Duration `yaml:"-"`
	// MaxMessageSize bounds a message body, and the whole body of a batch
	// (every message with its framing, as the client encodes it). Default
	// 4 MiB.
	MaxMessageSize int `yaml:"maxMessageSize" cfg:"size"`
	// MaxBatchMessages bounds how many messages one batch send may hold.
	// Default 10,000; at most maxBatchMessagesLimit, so the answer's list
	// of message ids (33 bytes each) always fits a frame header.
	MaxBatchMessages int `yaml:"maxBatchMessages"`
	// ClientExpiry drops producers and consumers that stop heartbeating.
	// Default 120 s.
	ClientExpiry time.Duration `yaml:"clientExpiry"`
	// MaxPullSuspend caps how long a pull is held. Default 25 s (clients
	// ask for 20 s and time out at 30 s).
	MaxPullSuspend time.Duration `yaml:"maxPullSuspend"`
	// MaxHeldPullsPerConn bounds the pulls held (long polling) for one
	// connection; beyond it a pull that finds nothing is answered
	// PULL_NOT_FOUND at once. Default 4,096: a client process shares one
	// connection per broker among all its consumers, one held pull per
	// queue, and each held pull costs about 1 KiB.
	MaxHeldPullsPerConn int `yaml:"maxHeldPullsPerConn"`
	// PullMaxBytes bounds the body of one pull response. Default 1 MiB.
	PullMaxBytes int `yaml:"pullMaxBytes" cfg:"size"`
	// Filters maps subscription expression types ("TAG", "SQL92", plugin
	// types) to their factories. An empty type means "TAG".
	Filters map[string]FilterFactory `yaml:"-"`
	// FilterCacheMaxBytes bounds the estimated memory of the compiled
	// subscription filters the broker keeps (at most 4,096 of them).
	// Default 32 MiB: a 16 KiB SQL92 expression compiles to about 1.5 MB,
	// a typical one of a hundred bytes to about 10 KB.
	// The distinct filters of held pulls have the same bound; beyond it a
	// pull with a filter no held pull shares is answered at once.
	FilterCacheMaxBytes int64 `yaml:"filterCacheMaxBytes" cfg:"size"`
	// MaxFilterExpression bounds a subscription expression's length; a
	// longer one is refused with SUBSCRIPTION_PARSE_FAILED. Default 16 KiB,
	// the SQL92 compiler's own limit.
	MaxFilterExpression int `yaml:"maxFilterExpression" cfg:"size"`
	// DisablePropertyFilter refuses SQL92 subscriptions.
	DisablePropertyFilter bool `yaml:"enablePropertyFilter" cfg:"not"`
	// DisableTraceTopic stops the broker creating TraceTopic at start
	// (RocketMQ's traceTopicEnable). Default false: the topic exists, so
	// clients tracing with default settings have somewhere to send.
	DisableTraceTopic bool `yaml:"traceTopicEnable" cfg:"not"`
	// DisablePrefilter turns off evaluating SQL92 subscriptions as
	// messages arrive; pulls then evaluate every message they scan.
	DisablePrefilter bool `yaml:"disablePrefilter"`
	// DisableNotifyConsumerIDsChanged stops telling consumers at once when
	// their group's membership changes; they still rebalance every 20 s.
	DisableNotifyConsumerIDsChanged bool `yaml:"disableNotifyConsumerIDsChanged"`
	// DelayLevels are the delays of levels 1, 2, …; default
	// DefaultDelayLevels. The store must be opened with TagCode(levels).
	DelayLevels DelayLevels `yaml:"delayLevels"`
	// MaxTimerDelay bounds how far ahead a timed message may be due.
	// Default 72 h.
	MaxTimerDelay time.Duration `yaml:"maxTimerDelay"`
	// Outbox writes an event to the outbox topic (EventsTopic) with every
	// retry and dead-letter move, for readers such as the NATS bridge.
	Outbox bool `yaml:"-"`
	// OutboxMaxBytes bounds the outbox; beyond it the oldest events are
	// dropped (readers see the gap). Default 1 GiB. Age is bounded by the
	// store's retention.
	OutboxMaxBytes int64 `yaml:"outboxMaxBytes" cfg:"size"`

	// Orderly consumption and transactions (locks.go, txn.go).

	// QueueLockExpiry is how long a queue lock of an orderly consumer lives
	// without renewal. Default 60 s.
	QueueLockExpiry time.Duration `yaml:"queueLockExpiry"`
	// TxnTimeout is how old a half message must be before a
	// transaction-check policy is first asked about it, and the default
	// policy's first check. Default 6 s.
	TxnTimeout time.Duration `yaml:"txnTimeout"`
	// TxnCheckInterval is the default policy's time between checks, and
	// the longest the checker sleeps. Default 60 s.
	TxnCheckInterval time.Duration `yaml:"txnCheckInterval"`
	// TxnCheckMax is how many checks the default policy sends before it
	// gives up on a half message. Default 15.
	TxnCheckMax int `yaml:"txnCheckMax"`
	// TxnPolicy decides what to do with unresolved half messages. Default
	// DefaultTxnPolicy with the three values above.
	TxnPolicy TxnPolicy `yaml:"-"`
	// TxnPolicies replaces TxnPolicy for the producer groups it names.
	TxnPolicies map[string]TxnPolicy `yaml:"-"`

	// GroupAllocator returns the allocator from outside the broker (an
	// allocate plugin) serving a consumer group at this moment, its name
	// for reports, and whether it was configured for the group itself
	// (own) rather than as the default of every group; a nil Allocator
	// when there is none. Called on every assignment query. Default: none,
	// only the built-in strategies.
	GroupAllocator func(group string) (a Allocator, name string, own bool) `yaml:"-"`

	// SendTransform returns the transform of sends to a topic (the
	// transform plugins whose topics match it), or nil for none. Called on
	// every send, so it must be quick. A send to a topic with a transform
	// is served on a worker rather than the connection's reader. Default:
	// none.
	SendTransform func(topic string) SendTransform `yaml:"-"`

	// Logger receives the broker's logs. Default slog.Default().
	Logger *slog.Logger `yaml:"-"`
	// Now is the clock. Default time.Now.
	Now func() time.Time `yaml:"-"`
	// Remoting holds the client-facing limits of the broker's port
	// (connections, deadlines, queued bytes); its Logger and OnClose are
	// the broker's. The config file has them under remoting:, set by
	// internal/server.
	Remoting remoting.ServerOptions `yaml:"-"`
	// NamesrvTLS, if set, makes the broker dial its name servers over TLS
	// with this config. Nil dials plain.
	NamesrvTLS *tls.Config `yaml:"-"`
	// NamesrvDial, if set, opens the connections to name servers in place
	// of a TCP dial (NamesrvTLS, if set, runs over them); internal/server
	// reaches its embedded name server within the process with it. Nil
	// dials TCP.
	NamesrvDial func(ctx context.Context, addr string) (net.Conn, error) `yaml:"-"`
}

// TopicOptions is a topic the broker creates at start (Options.Topics).
type TopicOptions struct {
	// Name is the topic's name. Required.
	Name string `yaml:"name"`
	// Queues is its read and write queue count. Default
	// Options.DefaultTopicQueueNums.
	Queues int `yaml:"queues"`
	// Perm is its permission bits (namesrv.PermRead 4, PermWrite 2).
	// Default read and write (6).
	Perm int `yaml:"perm"`
	// Order marks an orderly topic.
	Order bool `yaml:"order"`
	// MessageType is what RocketMQ 5 clients may send to it: NORMAL,
	// FIFO, DELAY, TRANSACTION, or MIXED (the default: any); PRIORITY or
	// LITE.
	MessageType string `yaml:"messageType"`
	// LiteExpiration, for a LITE topic, deletes a lite topic this long
	// after its last message, in whole minutes (rounded up); 0: never.
	LiteExpiration time.Duration `yaml:"liteTopicExpiration"`
}

// GroupOptions is a consumer group the broker configures at start
// (Options.Groups), with the fields of RocketMQ's subscription group
// config that an operator sets.
type GroupOptions struct {
	// Name is the group's name. Required.
	Name string `yaml:"name"`
	// RetryMaxTimes is how often a failed message is retried before it
	// goes to the group's dead-letter topic. Default 16; negative means
	// never retried: the first failure dead-letters it.
	RetryMaxTimes int `yaml:"retryMaxTimes"`
	// RetryQueueNums is the queue count of the group's retry topic.
	// Default 1.
	RetryQueueNums int `yaml:"retryQueueNums"`
	// DisableConsumeBroadcast refuses the group's consumers in
	// broadcasting mode (consumeBroadcastEnable: false).
	DisableConsumeBroadcast bool `yaml:"consumeBroadcastEnable" cfg:"not"`
	// ConsumeMessageOrderly makes the group FIFO for RocketMQ 5 clients
	// (see SubscriptionGroupConfig).
	ConsumeMessageOrderly bool `yaml:"consumeMessageOrderly"`
	// Attributes are RocketMQ's group attributes by name, as
	// SubscriptionGroupConfig.Attributes: priority.factor.
	Attributes map[string]string `yaml:"attributes"`
}

// config returns the group's configuration over old, the stored one or
// the default: the fields GroupOptions has replace old's.
func (g GroupOptions) config(old SubscriptionGroupConfig) SubscriptionGroupConfig {
	old.GroupName = g.Name
	old.RetryMaxTimes = max(g.RetryMaxTimes, 0)
	old.RetryQueueNums = g.RetryQueueNums
	old.ConsumeBroadcastEnable = !g.DisableConsumeBroadcast
	old.ConsumeMessageOrderly = g.ConsumeMessageOrderly
	old.Attributes = alterGroupAttributes(nil, g.Attributes)
	return old
}

// DelayLevels are the delays of levels 1, 2, …. As text (a config file,
// a flag) they are ParseDelayLevels' space-separated list.
type DelayLevels []time.Duration

// UnmarshalText parses the list with ParseDelayLevels.
func (l *DelayLevels) UnmarshalText(b []byte) error {
	v, err := ParseDelayLevels(string(b))
	if err != nil {
		return err
	}
	*l = v
	return nil
}

// String formats the list as ParseDelayLevels reads it.
func (l DelayLevels) String() string { return FormatDelayLevels(l) }

// withDefaults returns a copy of o with defaults filled in, or every
// problem found.
func (o Options) withDefaults() (Options, error) {
	if o.BrokerName == "" {
		o.BrokerName = DefaultBrokerName
	}
	if o.ClusterName == "" {
		o.ClusterName = DefaultClusterName
	}
	if o.RegisterInterval == 0 {
		o.RegisterInterval = DefaultRegisterInterval
	}
	if o.DefaultTopicQueueNums == 0 {
		o.DefaultTopicQueueNums = DefaultTopicQueueNums
	}
	if o.MaxMessageSize == 0 {
		o.MaxMessageSize = DefaultMaxMessageSize
	}
	if o.ClientExpiry == 0 {
		o.ClientExpiry = DefaultClientExpiry
	}
	if o.MaxPullSuspend == 0 {
		o.MaxPullSuspend = DefaultMaxPullSuspend
	}
	if o.PullMaxBytes == 0 {
		o.PullMaxBytes = DefaultPullMaxBytes
	}
	if o.MaxHeldPullsPerConn == 0 {
		o.MaxHeldPullsPerConn = DefaultMaxHeldPulls
	}
	if o.MaxBatchMessages == 0 {
		o.MaxBatchMessages = DefaultMaxBatchMessages
	}
	if o.FilterCacheMaxBytes == 0 {
		o.FilterCacheMaxBytes = DefaultFilterCacheBytes
	}
	if o.MaxFilterExpression == 0 {
		o.MaxFilterExpression = DefaultMaxFilterExpr
	}
	if o.MaxTopics == 0 {
		o.MaxTopics = DefaultMaxTopics
	}
	if o.MaxGroups == 0 {
		o.MaxGroups = DefaultMaxGroups
	}
	if o.MaxLiteTopics == 0 {
		o.MaxLiteTopics = DefaultMaxLiteTopics
	}
	if o.LiteExpiryInterval <= 0 {
		o.LiteExpiryInterval = time.Minute
	}
	if o.MaxSubscriptionsPerGroup == 0 {
		o.MaxSubscriptionsPerGroup = DefaultMaxSubscriptions
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if len(o.DelayLevels) == 0 {
		o.DelayLevels, _ = ParseDelayLevels(DefaultDelayLevels)
	}
	if o.OutboxMaxBytes == 0 {
		o.OutboxMaxBytes = DefaultOutboxMaxBytes
	}
	if o.MaxTimerDelay == 0 {
		o.MaxTimerDelay = DefaultMaxTimerDelay
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	errs := o.txnDefaults()
	o.Topics = slices.Clone(o.Topics)
	for i := range o.Topics {
		t := &o.Topics[i]
		if t.Queues == 0 {
			t.Queues = o.DefaultTopicQueueNums
		}
		if t.Perm == 0 {
			t.Perm = permRW
		}
		if err := checkTopicConfig(t.config()); err != nil {
			errs = append(errs, fmt.Errorf("broker: topics[%d]: %w", i, err))
		}
	}
	o.Groups = slices.Clone(o.Groups)
	for i := range o.Groups {
		g := &o.Groups[i]
		if g.RetryMaxTimes == 0 {
			g.RetryMaxTimes = DefaultMaxReconsumeTimes
		}
		if g.RetryQueueNums == 0 {
			g.RetryQueueNums = 1
		}
		if err := checkGroupConfig(g.config(defaultGroupConfig(g.Name))); err != nil {
			errs = append(errs, fmt.Errorf("broker: groups[%d]: %w", i, err))
		}
	}
	for i, d := range o.DelayLevels {
		if d < time.Second {
			errs = append(errs, fmt.Errorf("broker: delay level %d is %v; levels are at least 1s", i+1, d))
		}
	}
	if o.Store == nil {
		errs = append(errs, errors.New("broker: Options.Store is required"))
	}
	if o.DefaultTopicQueueNums < 1 || o.DefaultTopicQueueNums > maxQueueNums {
		errs = append(errs, fmt.Errorf("broker: DefaultTopicQueueNums %d is outside 1..%d", o.DefaultTopicQueueNums, maxQueueNums))
	}
	if o.MaxHeldPullsPerConn < 0 {
		errs = append(errs, errors.New("broker: MaxHeldPullsPerConn must not be negative"))
	}
	if o.MaxBatchMessages < 0 || o.MaxBatchMessages > maxBatchMessagesLimit {
		errs = append(errs, fmt.Errorf("broker: MaxBatchMessages %d is outside 1..%d", o.MaxBatchMessages, maxBatchMessagesLimit))
	}
	if o.FilterCacheMaxBytes < 0 || o.MaxFilterExpression < 0 {
		errs = append(errs, errors.New("broker: FilterCacheMaxBytes and MaxFilterExpression must not be negative"))
	}
	if o.MaxTopics < 0 || o.MaxGroups < 0 || o.MaxSubscriptionsPerGroup < 0 || o.MaxLiteTopics < 0 {
		errs = append(errs, errors.New("broker: MaxTopics, MaxGroups, MaxSubscriptionsPerGroup and MaxLiteTopics must not be negative"))
	}
	if o.MaxMessageSize < 1 {
		errs = append(errs, errors.New("broker: MaxMessageSize must be positive"))
	}
	if strings.ContainsAny(o.BrokerName, " ,:") || strings.ContainsAny(o.ClusterName, " ,:") {
		errs = append(errs, errors.New("broker: broker and cluster names must not contain spaces, commas or colons"))
	}
	return o, errors.Join(errs...)
}

// config returns the topic's configuration.
func (t TopicOptions) config() TopicConfig {
	return TopicConfig{TopicName: t.Name, ReadQueueNums: t.Queues, WriteQueueNums: t.Queues, Perm: t.Perm, Order: t.Order, MessageType: strings.ToUpper(t.MessageType),
		LiteExpiration: int((t.LiteExpiration + time.Minute - 1) / time.Minute)}
}

// Broker serves the RocketMQ broker protocol.
type Broker struct {
	opts  Options
	log   *slog.Logger
	store *store.Store
	rs    *remoting.Server
	nsc   *remoting.Client

	addr      string         // advertised address
	storeHost netip.AddrPort // advertised address as a STOREHOST

	topics  *topicTable
	clients *clientTable
	holds   *holdTable
	filters *filterCache
	pop     *popEngine // POP consumption (pop.go)
	lite    *liteTable // lite topics (lite.go)
	liteLog limitLog   // refused lite topics
	// liteSends is held for reading by each batch of sends with a lite
	// message, from its admission to its answer, and for writing while
	// lite topics are deleted, so no message is deleted with its lite
	// topic once sent.
	liteSends   sync.RWMutex
	liteExpired atomic.Pointer[func(parent, lite string)] // OnLiteExpired
	pullCheck   atomic.Pointer[func(group string) error]  // OnPull
	registerMu  sync.Mutex                                // serialises registrations
	regBytes    atomic.Int64                              // registration body bytes sent, all name servers
	levels      []time.Duration                           // delay levels, from Options
	events      eventsSignal
	prefilter   *prefilter    // nil when disabled
	sched       chan struct{} // cap 1: wake the scheduler
	// schedMu excludes Recall and the scheduler's steps (recall.go), and
	// guards recalls: the tombstones, read at each pass, added to by
	// Recall.
	schedMu     sync.Mutex
	recalls     recalled
	recallSwept time.Time    // the scheduler's last sweep of tombstones
	schedPasses atomic.Int64 // scheduler passes completed, for tests
	// passLoaded, a test's hook, runs in each scheduler pass once the
	// tombstones are read, before the first step, with the pass's time.
	passLoaded atomic.Pointer[func(now time.Time)]
	pulled     sync.Map // pullKey → *pulls: each group's pulls of each queue
	locks      *lockTable
	txn        *txnService
	admin      adminTable
	replAdmin  adminTable   // the admin commands a replica serves too (HandleReplicaAdmin)
	assigned   assignments  // last good assignment per client (assignment.go)
	relays     *relayLimits // bounds of the relays to clients (relays.go)

	// Rate limits of log lines: groups refused for having no config
	// (Options.DisableAutoCreateGroup), heartbeats over their bounds.
	unconfiguredLog limitLog
	heartbeatLog    limitLog
	groupQuotaLog   limitLog // group configs not auto-created at the quota
	notMasterLog    limitLog // writes refused by a member that stopped leading
	transformLog    limitLog // sends a transform refused or failed on

	// groupN counts the stored group configs and serialises their
	// creation and deletion (retry.go).
	groupN groupCount

	// rollTimersTo is the commit-log offset below which retention asked
	// for pending timed messages to be rolled (retention.go); 0 if none.
	rollTimersTo atomic.Int64

	meters     meters      // metrics.go
	registered atomic.Bool // the last full registration reached a name server (Ready)

	quit     chan struct{}
	wg       sync.WaitGroup
	stopping sync.Once
	// closing is set as Shutdown starts: pulls are answered with
	// SYSTEM_BUSY from then on (pull.go).
	closing atomic.Bool
	started chan struct{}
	boot    time.Time // when New built the broker, for GET_BROKER_RUNTIME_INFO
}

// New validates opts and builds a broker; Serve starts it.
func New(opts Options) (*Broker, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	b := &Broker{
		opts:    opts,
		log:     opts.Logger.With("component", "broker", "broker", opts.BrokerName),
		store:   opts.Store,
		quit:    make(chan struct{}),
		started: make(chan struct{}),
		boot:    opts.Now(),
		meters:  newMeters(),
		relays:  newRelayLimits(),
	}
	b.levels = opts.DelayLevels
	b.sched = make(chan struct{}, 1)
	b.pop = newPopEngine(b)
	b.lite = newLiteTable(opts.MaxLiteTopics)
	b.loadLiteTopics()
	b.topics, err = loadTopics(b.store, topicsConfig{
		log:               b.log,
		now:               b.now,
		changed:           b.topicChanged,
		queueNums:         opts.DefaultTopicQueueNums,
		maxTopics:         opts.MaxTopics,
		disableAutoCreate: opts.DisableAutoCreateTopic,
		replyTopic:        ReplyTopic(opts.ClusterName),
		readOnly:          opts.ReplicaID > 0,
	})
	if err != nil {
		return nil, err
	}
	if !opts.DisableTraceTopic && opts.ReplicaID == 0 {
		if _, ok := b.topics.get(TraceTopic); !ok {
			// One queue, as RocketMQ creates it.
			if err := b.topics.put(TopicConfig{TopicName: TraceTopic, ReadQueueNums: 1, WriteQueueNums: 1, Perm: permRW, TopicFilterType: "SINGLE_TAG"}); err != nil {
				return nil, err
			}
		}
	}
	for _, t := range opts.Topics {
		if opts.ReplicaID > 0 {
			break // the leader applies them
		}
		if err := b.topics.put(t.config()); err != nil {
			return nil, err
		}
	}
	if err := b.store.EachMeta(groupMetaKey, func(string, []byte) error { b.groupN.n++; return nil }); err != nil {
		return nil, err
	}
	for _, g := range opts.Groups {
		if opts.ReplicaID > 0 {
			break
		}
		old, _ := b.groupConfig(g.Name)
		if err := b.PutGroupConfig(g.config(old)); err != nil {
			return nil, err
		}
	}
	b.clients = newClientTable(b.log, opts.ClientExpiry, opts.MaxGroups, opts.DisableNotifyConsumerIDsChanged, func(ids []string) {
		b.locks.releaseClients(ids)
	})
	b.holds = newHoldTable(b.log, b.store, opts.MaxHeldPullsPerConn, opts.FilterCacheMaxBytes, func(p *pullRequest) *remoting.Command { return b.pull(p, false) })
	b.filters = newFilterCache(b.log, opts.Filters, filterCacheLimits{
		count: DefaultFilterCacheSize, bytes: opts.FilterCacheMaxBytes, exprLen: opts.MaxFilterExpression, disableS: opts.DisablePropertyFilter,
	})
	if !opts.DisablePrefilter && opts.ReplicaID == 0 {
		if b.prefilter, err = newPrefilter(b.log, b.store, b.topics.get, b.filters.compile); err != nil {
			return nil, err
		}
	}
	if err := b.countTimedIndexed(); err != nil {
		return nil, err
	}
	b.clients.save = b.saveConsumerGroups
	if err := b.restoreConsumers(); err != nil {
		return nil, err
	}
	b.locks = newLockTable(b.log, opts.BrokerName, opts.QueueLockExpiry, func(group string, conns []*remoting.Conn) {
		b.clients.notify(group, conns)
	})
	if b.txn, err = newTxnService(txnDeps{
		log:           b.log,
		now:           b.now,
		store:         b.store,
		quit:          b.quit,
		timeout:       opts.TxnTimeout,
		checkInterval: opts.TxnCheckInterval,
		policy:        opts.TxnPolicy,
		policies:      opts.TxnPolicies,
		producers:     b.clients.producerConns,
		ensureTopic:   b.topics.ensure,
		schedule:      b.toSchedule,
	}); err != nil {
		return nil, err
	}
	b.nsc = remoting.NewClient(remoting.ClientOptions{Logger: opts.Logger, TLS: opts.NamesrvTLS, Dial: opts.NamesrvDial})
	ro := opts.Remoting
	ro.Logger, ro.OnClose = opts.Logger, b.connClosed
	b.rs = remoting.NewServer(ro)
	b.routes()
	b.registerBuiltinAdmin()
	// Before anything is served, so no retention pass runs without them.
	b.store.SetRetentionHooks(b.retentionHooks())
	return b, nil
}

// routes registers the request handlers.
func (b *Broker) routes() {
	h := b.handle // a replica refuses writes (replica.go)
	h(remoting.SendMessage, b.handleSend)
	h(remoting.SendMessageV2, b.handleSend)
	h(remoting.SendBatchMessage, b.handleSend)
	h(remoting.SendReplyMessage, b.handleSendReply)
	h(remoting.SendReplyMessageV2, b.handleSendReply)
	for _, code := range []int16{remoting.SendMessage, remoting.SendMessageV2, remoting.SendBatchMessage} {
		if b.opts.ReplicaID == 0 {
			b.rs.HandleFast(code, b.sendFast)
		}
	}
	h(remoting.PullMessage, b.handlePull)
	h(remoting.LitePullMessage, b.handlePull) // the Java lite pull consumer's
	h(remoting.QueryConsumerOffset, b.handleQueryOffset)
	h(remoting.UpdateConsumerOffset, b.handleUpdateOffset)
	h(remoting.GetMaxOffset, b.handleMaxOffset)
	h(remoting.GetMinOffset, b.handleMinOffset)
	h(remoting.SearchOffsetByTimestamp, b.handleSearchOffset)
	h(remoting.GetEarliestMsgStoretime, b.handleEarliestStoreTime)
	h(remoting.HeartBeat, b.handleHeartbeat)
	h(remoting.UnregisterClient, b.handleUnregister)
	h(remoting.CheckClientConfig, b.handleCheckClientConfig)
	h(remoting.GetConsumerListByGroup, b.handleConsumerList)
	h(remoting.UpdateAndCreateTopic, b.handleCreateTopic)
	h(remoting.DeleteTopicInBroker, b.handleDeleteTopic)
	h(remoting.ViewMessageByID, b.handleViewMessage)
	h(remoting.QueryMessage, b.handleQueryMessage)
	h(remoting.ConsumerSendMsgBack, b.handleSendBack)
	h(remoting.LockBatchMQ, b.handleLockBatch)
	h(remoting.UnlockBatchMQ, b.handleUnlockBatch)
	h(remoting.EndTransaction, b.handleEndTransaction)
	h(remoting.UpdateAndCreateSubscriptionGroup, b.handleUpdateGroup)
	h(remoting.GetAllSubscriptionGroupConfig, b.handleAllGroups)
	h(remoting.DeleteSubscriptionGroup, b.handleDeleteGroup)
	h(remoting.QueryAssignment, b.handleQueryAssignment)
	h(remoting.RecallMessage, b.handleRecall)
	h(remoting.GetConsumeStats, b.handleConsumeStats)
	h(remoting.GetTopicStatsInfo, b.handleTopicStats)
	h(remoting.GetConsumerConnectionList, b.handleConsumerConnections)
	h(remoting.GetProducerConnectionList, b.handleProducerConnections)
	h(remoting.GetAllTopicConfig, b.handleAllTopics)
	h(remoting.GetBrokerRuntimeInfo, b.handleRuntimeInfo)
	h(remoting.InvokeBrokerToResetOffset, b.handleResetOffset)
	h(remoting.InvokeBrokerToGetConsumerStatus, b.handleConsumerStatus)
	h(remoting.GetConsumerRunningInfo, b.handleRunningInfo)
	h(remoting.ConsumeMessageDirectly, b.handleConsumeDirectly)
	h(AdminCode, b.handleAdmin)
}

// Serve serves connections on ln, and the same requests on more (the VIP
// channel, the port below by two, which old Java clients send to), until
// Shutdown. The advertised address defaults to ln's.
func (b *Broker) Serve(ln net.Listener, more ...net.Listener) error {
	addr := b.opts.AdvertiseAddr
	if addr == "" {
		addr = advertised(ln.Addr())
		if ta, ok := ln.Addr().(*net.TCPAddr); ok && ta.IP.IsUnspecified() {
			b.log.Warn("listening on every address without an advertised one; routes name the first non-loopback address, set advertise if clients must dial another", "listen", ln.Addr().String(), "advertised", addr)
		}
	}
	ap, err := netip.ParseAddrPort(addr)
	if err != nil {
		return fmt.Errorf("broker: advertise address %q: want ip:port (%v)", addr, err)
	}
	b.addr, b.storeHost = addr, ap
	b.txn.start(ap)
	b.store.SetArrivalHook(b.arrived)
	// Register before anyone is told the broker is up, so a client started
	// right after finds its routes.
	b.registerAll()
	b.goTracked(b.registerLoop)
	b.goTracked(func() { b.every(b.clients.sweepGap(), func() { b.clients.sweep(b.now()) }) })
	b.goTracked(func() { b.every(b.locks.sweepGap(), func() { b.locks.sweep(b.now()) }) })
	if b.opts.ReplicaID == 0 {
		// The services that write; a replica's leader runs them.
		b.goTracked(b.scheduleLoop)
		if b.outboxOn() {
			b.goTracked(b.outboxLoop)
		}
		if b.prefilter != nil {
			b.goTracked(func() { b.prefilter.loop(b.quit) })
		}
		b.goTracked(func() { b.clients.writeSnapshots(b.quit) })
		b.goTracked(b.txn.run)
		b.goTracked(func() { b.every(b.opts.LiteExpiryInterval, b.expireLiteTopics) })
	}
	close(b.started)
	for _, m := range more {
		b.goTracked(func() {
			if err := b.rs.Serve(m); err != nil && !errors.Is(err, remoting.ErrServerClosed) {
				b.log.Error("broker: a further listener failed", "addr", m.Addr().String(), "err", err)
			}
		})
	}
	err = b.rs.Serve(ln)
	if errors.Is(err, remoting.ErrServerClosed) {
		return nil
	}
	return err
}

// advertised turns a listener address into one clients can dial. A
// listener on every address (0.0.0.0 or ::) advertises the host's first
// non-loopback IPv4 address, so remote clients are not sent to their own
// loopback; a host with none advertises 127.0.0.1.
func advertised(a net.Addr) string {
	ta, ok := a.(*net.TCPAddr)
	if !ok {
		return a.String()
	}
	ip := ta.IP
	if ip == nil || ip.IsUnspecified() {
		ip = remoting.HostIPv4()
	}
	ap, _ := netip.AddrFromSlice(ip)
	return netip.AddrPortFrom(ap.Unmap(), uint16(ta.Port)).String()
}

// Addr returns the advertised address once Serve has started.
func (b *Broker) Addr() string {
	<-b.started
	return b.addr
}

// every calls fn every d until the broker stops.
func (b *Broker) every(d time.Duration, fn func()) {
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		select {
		case <-b.quit:
			return
		case <-t.C:
			fn()
		}
	}
}

func (b *Broker) goTracked(fn func()) {
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		fn()
	}()
}

// Shutdown stops accepting, finishes in-flight requests (until ctx ends),
// unregisters from the name servers and stops the background work. It does
// not close the store. It is safe to call more than once.
func (b *Broker) Shutdown(ctx context.Context) error {
	var err error
	b.stopping.Do(func() {
		// Closing connections drop their clients; the groups' snapshots
		// keep them for the next start.
		b.clients.frozen.Store(true)
		// Pulls are answered SYSTEM_BUSY from now on, held ones at once.
		// Consumers still connected are given pullGrace to send the pull
		// that follows the one they were just answered, and receive that
		// answer too: a client pulling on a connection that has stopped
		// being read waits for its pull timeout (the official Go client
		// 30 s) instead of 3 s before it comes back.
		b.closing.Store(true)
		b.holds.releaseAll()
		if b.clients.anyConsumer() {
			t := time.NewTimer(pullGrace)
			select {
			case <-t.C:
			case <-ctx.Done():
			}
			t.Stop()
		}
		close(b.quit)
		err = b.rs.Shutdown(ctx)
		b.wg.Wait()
		b.unregister(ctx)
		b.nsc.Close()
	})
	return err
}

func (b *Broker) now() time.Time { return b.opts.Now() }

// response builds a response with a code and remark.
func response(req *remoting.Command, code int16, format string, args ...any) *remoting.Command {
	return remoting.NewResponse(req, code, fmt.Sprintf(format, args...))
}

// arrived is the store's arrival hook.
func (b *Broker) arrived(topic string, queue int32, maxOffset int64) {
	b.holds.arrived(topic, queue, maxOffset)
	if parent, lite, ok := SplitLiteQueue(topic); ok {
		b.lite.seen(parent, lite, b.now().UnixMilli())
		b.pop.wakeLite(parent, lite) // lite receives wait on the parent
	} else {
		b.pop.wake(topic)
	}
	switch topic {
	case ScheduleTopic, TimerTopic:
		select {
		case b.sched <- struct{}{}:
		default:
		}
	case EventsTopic:
		b.events.fire()
	default:
		b.prefilter.arrived(topic)
	}
}
