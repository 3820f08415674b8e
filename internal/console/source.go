package console

import (
	"context"
	"errors"
	"time"
)

// Source is what the console reads and the few actions it takes. The
// server implements it over the in-process broker, store, plugins and
// bridge; every call returns plain values the console owns, and each list
// is bounded by the table it walks or by the limit passed in.
type Source interface {
	// Overview returns the broker's figures. Counters (Stored) are totals
	// since start; the console turns them into rates between page loads.
	Overview() Overview
	// Topics returns every topic; the console sorts and pages them. It
	// must be cheap: offsets per queue, no record reads.
	Topics() []Topic
	// Topic returns one topic with its queues, ErrNotFound if none.
	Topic(name string) (TopicDetail, error)
	// Groups returns every consumer group, configured or online.
	Groups() []Group
	// Group returns one group, ErrNotFound if the broker knows none.
	Group(name string) (GroupDetail, error)
	// FindMessages looks messages up by id, key or position, up to
	// q.Limit.
	FindMessages(q MessageQuery) ([]Message, error)
	// DeadLetters returns up to limit dead letters of group, from the
	// dead-letter queue offset from on.
	DeadLetters(group string, from int64, limit int) ([]DeadLetter, error)
	// ResendDeadLetter sends the dead letter at queueOffset of group's
	// dead-letter queue again, as a new message, to its original topic.
	ResendDeadLetter(group string, queueOffset int64) (Resent, error)
	// Scheduled returns the delayed and timed messages waiting.
	Scheduled() Scheduled
	// Transactions returns the unresolved transactions, the oldest up to
	// limit.
	Transactions(limit int) Transactions
	// Plugins returns the WASM plugins with their statistics.
	Plugins() []Plugin
	// ReloadPlugins re-reads and applies the plugin list, all or nothing,
	// and says what changed.
	ReloadPlugins(ctx context.Context) (string, error)
	// Bridge returns the NATS bridge's status as labelled values, false
	// when the bridge is off.
	Bridge() ([]Field, bool)
}

// ErrNotFound is a Source's answer for a topic, group or message it does
// not hold.
var ErrNotFound = errors.New("console: not found")

// Field is a labelled value.
type Field struct{ Name, Value string }

// Overview is the front page.
type Overview struct {
	BrokerName, Cluster, Addr, Version string
	Started                            time.Time
	Topics, Groups, OnlineGroups       int
	Connections                        int
	Stored                             int64 // records stored since start
	CommitLogBytes                     int64 // retained commit log
	DiskUsed, DiskTotal                int64
	ACL, TLS                           bool
	Plugins                            int
	Bridge                             bool
}

// Topic is a row of the topic list.
type Topic struct {
	Name                    string
	ReadQueues, WriteQueues int
	Perm                    int
	Order                   bool
	MessageType             string // what RocketMQ 5 clients may send ("": NORMAL, FIFO, DELAY, TRANSACTION)
	Messages                int64  // retained: the sum of max − min offsets
	MaxOffsets              int64  // the sum of max offsets, for rates
	// LiteTopics, for a LITE topic, counts its lite topics; Messages and
	// MaxOffsets then count theirs.
	LiteTopics int
}

// TopicDetail is a topic's page.
type TopicDetail struct {
	Topic
	Queues []Queue
	Groups []GroupLag // groups with offsets on the topic or subscribed to it
}

// Queue is one queue of a topic.
type Queue struct {
	ID                   int32
	MinOffset, MaxOffset int64
	LastStored           time.Time // zero when empty
}

// GroupLag is a group's total lag on one topic.
type GroupLag struct {
	Group string
	Lag   int64
	// Committed is false for a group subscribed online that has not
	// committed an offset on the topic yet (Lag is then unknown).
	Committed bool
}

// Group is a row of the group list.
type Group struct {
	Name        string
	Configured  bool // the broker holds a configuration for it
	Online      int  // members online
	Model       string
	Strategy    string
	Lag         int64 // over the queues it committed offsets on
	DeadLetters int64
}

// GroupDetail is a group's page.
type GroupDetail struct {
	Group
	Config         []Field
	ConsumeType    string
	FromWhere      string
	StrategySource string
	Members        []Member
	Subscriptions  []Subscription
	Queues         []QueueLag
}

// Member is an online client of a group.
type Member struct{ ClientID, Addr, Language, Version string }

// Subscription is a group's subscription to a topic.
type Subscription struct{ Topic, Type, Expression string }

// QueueLag is a group's progress on one queue.
type QueueLag struct {
	Topic                        string
	QueueID                      int32
	BrokerOffset, ConsumerOffset int64
	Lag                          int64
}

// MessageQuery picks messages: by ID (an offsetMsgId alone, or a client
// message id with Topic), by Key with Topic, or by Topic, QueueID and
// Offset.
type MessageQuery struct {
	ID, Key, Topic string
	QueueID        int32
	Offset         int64
	ByOffset       bool
	Limit          int
}

// Message is a stored message.
type Message struct {
	Topic               string
	QueueID             int32
	QueueOffset         int64
	CommitLogOffset     int64
	MsgID, OffsetMsgID  string
	Tags, Keys          string
	BornHost, StoreHost string
	Born, Stored        time.Time
	ReconsumeTimes      int32
	Properties          []Field
	BodySize            int
	Body                []byte // at most Options.BodyPreview bytes
}

// DeadLetter is one message of a group's dead-letter queue.
type DeadLetter struct {
	QueueOffset    int64
	MsgID          string
	Topic          string // where it came from
	Tags, Keys     string
	ReconsumeTimes int32
	Stored         time.Time
	BodySize       int
}

// Resent reports a dead letter sent again.
type Resent struct {
	OldMsgID, NewMsgID, Topic string
	QueueID                   int32
}

// Scheduled is what waits in the scheduler.
type Scheduled struct {
	Levels       []DelayLevel
	Timed        int
	TimedMore    bool // Timed stopped at the console's count limit
	TimedNextDue time.Time
}

// DelayLevel is one delay level's backlog.
type DelayLevel struct {
	Level   int
	Delay   time.Duration
	Pending int64
}

// Transactions are the unresolved transactions.
type Transactions struct {
	Total  int
	Oldest []Transaction
}

// Transaction is one unresolved transaction.
type Transaction struct {
	ProducerGroup   string
	CommitLogOffset int64
	Stored          time.Time
	Checks          int32
	LastCheck       time.Time
}

// Plugin is one WASM plugin.
type Plugin struct {
	Name, Kind, Serves, Module, Version, SHA256 string
	Generation                                  int
	Calls, Errors, Traps, Timeouts              uint64
	Rejected                                    uint64 // messages a transform refused
	P99                                         time.Duration
	Disabled                                    bool
	LastError                                   string
}
