package broker

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/rmq-go/rmq/core/remoting"
	"github.com/rmq-go/rmq/core/store"
)

// TopicConfig is a topic's configuration: queue counts and permissions.
type TopicConfig = remoting.TopicConfig

// Names and limits of topics.
const (
	// AutoCreateTopicKey is the template topic of auto-created topics.
	AutoCreateTopicKey = remoting.AutoCreateTopicKey
	// RetryGroupTopicPrefix prefixes a group's retry topic.
	RetryGroupTopicPrefix = remoting.RetryGroupTopicPrefix
	// DLQGroupTopicPrefix prefixes a group's dead-letter topic.
	DLQGroupTopicPrefix = remoting.DLQGroupTopicPrefix
	// TraceTopic receives message traces from clients that trace without
	// naming a topic (RocketMQ's RMQ_SYS_TRACE_TOPIC). It is a client
	// topic, writable like any other; the broker only creates it.
	TraceTopic = "RMQ_SYS_TRACE_TOPIC"
	// ScheduleTopic holds delayed messages until they are due.
	ScheduleTopic = "SCHEDULE_TOPIC_XXXX"
	// HalfTopic holds transactional half messages.
	HalfTopic = "RMQ_SYS_TRANS_HALF_TOPIC"
	// OpHalfTopic records transaction outcomes.
	OpHalfTopic = "RMQ_SYS_TRANS_OP_HALF_TOPIC"
	// TimerTopic holds timed messages (TIMER_DELIVER_MS and friends) until
	// they are due.
	TimerTopic = "RMQ_SYS_TIMER_TOPIC"
	// ReplyTopicSuffix ends the name of a cluster's reply topic,
	// <cluster>_REPLY_TOPIC (ReplyTopic).
	ReplyTopicSuffix = "_REPLY_TOPIC"

	maxQueueNums = 1024
	topicMetaKey = "topic/"
	permRW       = remoting.PermRead | remoting.PermWrite
)

// ErrBadTopic is returned for a topic name clients may not use.
var ErrBadTopic = errors.New("broker: invalid topic")

// ValidateTopic checks a topic name: 1 to 127 characters of
// [%|a-zA-Z0-9_-] (remoting.ValidateTopicName).
func ValidateTopic(topic string) error {
	if err := remoting.ValidateTopicName(topic); err != nil {
		return fmt.Errorf("%w: %v", ErrBadTopic, err)
	}
	return nil
}

// ReplyTopic is the topic a cluster's request-reply answers are stored in:
// responders built on RocketMQ's clients send their replies to it.
func ReplyTopic(cluster string) string { return cluster + ReplyTopicSuffix }

// systemTopic reports whether clients may not send to topic directly.
func systemTopic(topic string) bool {
	return topic == ScheduleTopic || topic == HalfTopic || topic == OpHalfTopic || topic == TimerTopic || topic == EventsTopic
}

// reservedTopic reports whether topic belongs to the broker: the system
// topics, the auto-create template, the transaction check-max topic and
// every dead-letter topic. No client send or dead-letter resend may write
// into one; the broker writes them itself.
func reservedTopic(topic string) bool {
	return systemTopic(topic) || topic == AutoCreateTopicKey || topic == TxnCheckMaxTopic ||
		strings.HasPrefix(topic, DLQGroupTopicPrefix) || strings.HasPrefix(topic, LiteQueuePrefix)
}

// brokerTopic reports whether topic is one of the fixed few the broker
// creates for itself, which the topic quota never refuses.
func brokerTopic(topic string) bool {
	return systemTopic(topic) || topic == AutoCreateTopicKey || topic == TxnCheckMaxTopic || topic == TraceTopic
}

// topicTable is the broker's topic configuration, persisted in the store.
type topicTable struct {
	log   *slog.Logger
	now   func() time.Time
	store *store.Store
	// changed is called, with no lock held, after a topic is saved or
	// deleted (the broker registers with the name servers).
	changed func(topic string, deleted bool)
	// max bounds the table (Options.MaxTopics).
	max      int
	quotaLog limitLog
	// replyTopic is this cluster's reply topic, created at startup and
	// never counted against max.
	replyTopic string

	// replica marks a replica's table (topicsConfig.readOnly): get reads
	// a topic it misses from the store, logging a failure at most every
	// limitLogGap (storedLog).
	replica   bool
	storedLog limitLog

	mu      sync.RWMutex
	topics  map[string]TopicConfig
	version remoting.DataVersion
}

// topicsConfig is what loadTopics needs besides the store.
type topicsConfig struct {
	log     *slog.Logger
	now     func() time.Time
	changed func(topic string, deleted bool)
	// queueNums and disableAutoCreate shape the template topic
	// (Options.DefaultTopicQueueNums, DisableAutoCreateTopic).
	queueNums         int
	disableAutoCreate bool
	// maxTopics is Options.MaxTopics.
	maxTopics int
	// replyTopic is the cluster's reply topic (ReplyTopic).
	replyTopic string
	// readOnly keeps the topics created at startup in memory only: a
	// replica's leader stores them (Options.ReplicaID).
	readOnly bool
}

// loadTopics reads the topic table from st and saves the template topic
// when it is missing or auto-creation is off, and the reply topic when it
// is missing.
func loadTopics(st *store.Store, cfg topicsConfig) (*topicTable, error) {
	t := &topicTable{log: cfg.log, now: cfg.now, store: st, changed: cfg.changed, max: cfg.maxTopics, replyTopic: cfg.replyTopic, replica: cfg.readOnly, topics: map[string]TopicConfig{}}
	err := st.EachMeta(topicMetaKey, func(name string, v []byte) error {
		var tc TopicConfig
		if err := json.Unmarshal(v, &tc); err != nil {
			return fmt.Errorf("broker: topic config %s: %w", name, err)
		}
		t.topics[tc.TopicName] = tc
		return nil
	})
	if err != nil {
		return nil, err
	}
	n := cfg.queueNums
	if _, ok := t.topics[AutoCreateTopicKey]; !ok || cfg.disableAutoCreate {
		tc := TopicConfig{TopicName: AutoCreateTopicKey, ReadQueueNums: n, WriteQueueNums: n, Perm: permRW | remoting.PermInherit, TopicFilterType: "SINGLE_TAG"}
		if cfg.disableAutoCreate {
			tc.Perm = permRW
		}
		if err := t.persistUnlessReadOnly(cfg, tc); err != nil {
			return nil, err
		}
		t.topics[tc.TopicName] = tc
	}
	if _, ok := t.topics[t.replyTopic]; !ok && t.replyTopic != "" {
		// As RocketMQ's broker does at startup: one queue, readable and
		// writable, so a responder's client finds a route for it.
		tc := TopicConfig{TopicName: t.replyTopic, ReadQueueNums: 1, WriteQueueNums: 1, Perm: permRW, TopicFilterType: "SINGLE_TAG"}
		if err := t.persistUnlessReadOnly(cfg, tc); err != nil {
			return nil, err
		}
		t.topics[tc.TopicName] = tc
	}
	t.version = remoting.DataVersion{Timestamp: t.now().UnixMilli()}
	return t, nil
}

func (t *topicTable) persistUnlessReadOnly(cfg topicsConfig, tc TopicConfig) error {
	if cfg.readOnly {
		return nil
	}
	return t.persist(tc)
}

func (t *topicTable) persist(tc TopicConfig) error {
	v, err := json.Marshal(tc)
	if err != nil {
		return err
	}
	return t.store.PutMeta(topicMetaKey+tc.TopicName, v)
}

func (t *topicTable) get(topic string) (TopicConfig, bool) {
	tc, ok, err := t.lookup(topic)
	if err != nil {
		if t.storedLog.allow(t.now()) {
			t.log.Warn("replica: topic config unreadable", "topic", logName(topic), "err", err)
		}
		return TopicConfig{}, false
	}
	return tc, ok
}

// lookup returns a topic's configuration. A replica reloads its table at
// each registration; a topic its leader created since is read from the
// store and kept in the table, as a new version, so a replica serves what
// its store holds at once and registers it next time.
func (t *topicTable) lookup(topic string) (TopicConfig, bool, error) {
	t.mu.RLock()
	tc, ok := t.topics[topic]
	t.mu.RUnlock()
	if ok || !t.replica {
		return tc, ok, nil
	}
	tc, ok, err := t.stored(topic)
	if err != nil || !ok {
		return TopicConfig{}, false, err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, known := t.topics[topic]; !known {
		t.topics[topic] = tc
		t.changedLocked()
	}
	return t.topics[topic], true, nil
}

// changedLocked moves the table to a new version. t.mu must be held for
// writing.
func (t *topicTable) changedLocked() {
	t.version.Counter++
	t.version.Timestamp = t.now().UnixMilli()
}

// current returns a topic's configuration with the table's version.
func (t *topicTable) current(topic string) (TopicConfig, remoting.DataVersion, bool) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	tc, ok := t.topics[topic]
	return tc, t.version, ok
}

// snapshot returns a copy of the table and its version.
func (t *topicTable) snapshot() (map[string]TopicConfig, remoting.DataVersion) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return maps.Clone(t.topics), t.version
}

// put creates or replaces a topic durably and registers it with the name
// servers before returning.
func (t *topicTable) put(tc TopicConfig) error {
	if err := checkTopicConfig(tc); err != nil {
		return err
	}
	if tc.TopicFilterType == "" {
		tc.TopicFilterType = "SINGLE_TAG"
	}
	t.mu.Lock()
	old, ok := t.topics[tc.TopicName]
	if ok && old == tc {
		t.mu.Unlock()
		return nil
	}
	if !ok && len(t.topics) >= t.max && !brokerTopic(tc.TopicName) && tc.TopicName != t.replyTopic {
		n := len(t.topics)
		t.mu.Unlock()
		if t.quotaLog.allow(t.now()) {
			t.log.Warn("topic quota reached; creation refused", "topic", logName(tc.TopicName), "topics", n, "limit", t.max)
		}
		return fmt.Errorf("%w: %d topics exist, the limit is %d (maxTopics); %s not created", ErrTopicQuota, n, t.max, logName(tc.TopicName))
	}
	if err := t.persist(tc); err != nil {
		t.mu.Unlock()
		return err
	}
	t.topics[tc.TopicName] = tc
	t.changedLocked()
	t.mu.Unlock()
	t.log.Info("topic saved", "topic", tc.TopicName, "read_queues", tc.ReadQueueNums, "write_queues", tc.WriteQueueNums, "perm", tc.Perm)
	t.changed(tc.TopicName, false)
	return nil
}

// ensure returns the topic, creating it with tc when it does not exist.
func (t *topicTable) ensure(tc TopicConfig) (TopicConfig, error) {
	if old, ok := t.get(tc.TopicName); ok {
		return old, nil
	}
	if err := t.put(tc); err != nil {
		return TopicConfig{}, err
	}
	got, _ := t.get(tc.TopicName)
	return got, nil
}

func (t *topicTable) delete(topic string) error {
	t.mu.Lock()
	if _, ok := t.topics[topic]; !ok {
		t.mu.Unlock()
		return nil
	}
	if err := t.store.DeleteMeta(topicMetaKey + topic); err != nil {
		t.mu.Unlock()
		return err
	}
	delete(t.topics, topic)
	t.changedLocked()
	t.mu.Unlock()
	t.log.Info("topic deleted", "topic", topic)
	t.changed(topic, true)
	return nil
}

func checkTopicConfig(tc TopicConfig) error {
	var errs []error
	if err := ValidateTopic(tc.TopicName); err != nil {
		errs = append(errs, err)
	}
	if tc.ReadQueueNums < 1 || tc.ReadQueueNums > maxQueueNums || tc.WriteQueueNums < 1 || tc.WriteQueueNums > maxQueueNums {
		errs = append(errs, fmt.Errorf("broker: topic %s: queue counts must be 1..%d (read %d, write %d)",
			tc.TopicName, maxQueueNums, tc.ReadQueueNums, tc.WriteQueueNums))
	}
	if tc.WriteQueueNums > tc.ReadQueueNums {
		// Queues beyond the read count are in no consumer's route, so what
		// is written there is never delivered. Shrinking a topic lowers the
		// write count first and the read count once those queues drained.
		errs = append(errs, fmt.Errorf("broker: topic %s: writeQueueNums %d exceeds readQueueNums %d; messages in the extra queues could never be consumed",
			tc.TopicName, tc.WriteQueueNums, tc.ReadQueueNums))
	}
	if tc.Perm&^(remoting.PermPriority|permRW|remoting.PermInherit) != 0 {
		errs = append(errs, fmt.Errorf("broker: topic %s: unknown permission bits in %d", tc.TopicName, tc.Perm))
	}
	if !slices.Contains(MessageTypes, tc.MessageType) && tc.MessageType != "" {
		errs = append(errs, fmt.Errorf("broker: topic %s: message type %q is not one of %s", tc.TopicName, tc.MessageType, strings.Join(MessageTypes, ", ")))
	}
	if tc.LiteExpiration < 0 || tc.LiteExpiration > maxLiteExpiration || tc.LiteExpiration != 0 && tc.MessageType != MessageTypeLite {
		errs = append(errs, fmt.Errorf("broker: topic %s: a lite topic expiration of %d minutes: want 1 to %d, for a LITE topic, or 0 (never)", tc.TopicName, tc.LiteExpiration, maxLiteExpiration))
	}
	if tc.MessageType == MessageTypeLite && len(tc.TopicName) > MaxLiteParentLen {
		errs = append(errs, fmt.Errorf("broker: topic %s: a LITE topic's name is at most %d characters, so that its lite topics' queues have names", tc.TopicName, MaxLiteParentLen))
	}
	return errors.Join(errs...)
}

// writableQueues is how many queues a send may pick among: the write
// queues that are also read queues. A topic saved by an older version may
// have more write queues than read ones.
func writableQueues(tc TopicConfig) int32 {
	return int32(max(1, min(tc.ReadQueueNums, tc.WriteQueueNums)))
}

// autoCreate creates topic from the template named by defaultTopic, as a
// send to an unknown topic does.
func (b *Broker) autoCreate(topic, defaultTopic string, queueNums int) (TopicConfig, error) {
	if group, ok := strings.CutPrefix(topic, RetryGroupTopicPrefix); ok {
		// A group's retry topic exists for groups the broker knows, as
		// the official client's fallback send needs; never for a name a
		// client makes up.
		if err := b.knownGroup(group); err != nil {
			return TopicConfig{}, refusef(ErrTopicNotFound, "topic %s does not exist: %w", logName(topic), err)
		}
		tc, err := b.ensureRetry(group)
		if errors.Is(err, ErrNoRetry) {
			return tc, refusef(ErrTopicNotFound, "topic %s does not exist: %w", logName(topic), err)
		}
		return tc, creationError(err)
	}
	if strings.HasPrefix(topic, DLQGroupTopicPrefix) {
		return TopicConfig{}, refusef(ErrNoPermission, "%w: %s is created only by the broker", ErrReservedTopic, logName(topic))
	}
	if b.opts.DisableAutoCreateTopic {
		return TopicConfig{}, refusef(ErrTopicNotFound, "topic %s does not exist and auto-creation is off", topic)
	}
	if defaultTopic == "" {
		defaultTopic = AutoCreateTopicKey
	}
	tmpl, ok := b.topics.get(defaultTopic)
	if !ok || tmpl.Perm&remoting.PermInherit == 0 {
		return TopicConfig{}, refusef(ErrTopicNotFound, "topic %s does not exist and %s cannot be inherited from", topic, defaultTopic)
	}
	n := tmpl.WriteQueueNums
	if queueNums > 0 && queueNums < n {
		n = queueNums
	}
	tc, err := b.topics.ensure(TopicConfig{TopicName: topic, ReadQueueNums: n, WriteQueueNums: n, Perm: tmpl.Perm &^ remoting.PermInherit})
	return tc, creationError(err)
}

// creationError classifies a failure to create a topic: a topic that the
// quota keeps from existing does not exist.
func creationError(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, ErrTopicQuota):
		return refusef(ErrTopicNotFound, "%w", err)
	}
	return refusef(ErrInternal, "%w", err)
}

func (b *Broker) handleCreateTopic(c *remoting.Conn, req *remoting.Command) *remoting.Command {
	tc := TopicConfig{TopicName: req.Get("topic"), TopicFilterType: req.Get("topicFilterType")}
	var errs []error
	var err error
	tc.ReadQueueNums, err = intField(req, "readQueueNums", 8)
	errs = append(errs, err)
	tc.WriteQueueNums, err = intField(req, "writeQueueNums", 8)
	errs = append(errs, err)
	tc.Perm, err = intField(req, "perm", permRW)
	errs = append(errs, err)
	tc.TopicSysFlag, err = intField(req, "topicSysFlag", 0)
	errs = append(errs, err)
	tc.Order, err = req.BoolOr("order", false)
	errs = append(errs, err)
	if old, ok := b.topics.get(tc.TopicName); ok {
		// An update keeps the attributes it does not name.
		tc.MessageType, tc.LiteExpiration = old.MessageType, old.LiteExpiration
	}
	if attrs, ok := req.Fields()["attributes"]; ok {
		errs = append(errs, applyTopicAttributes(&tc, attrs))
	}
	if err := errors.Join(errs...); err != nil {
		return response(req, remoting.SystemError, "%v", err)
	}
	if tc.TopicName == AutoCreateTopicKey || systemTopic(tc.TopicName) {
		return response(req, remoting.NoPermission, "topic %s is reserved", tc.TopicName)
	}
	if err := b.topics.put(tc); err != nil {
		return response(req, remoting.SystemError, "%v", err)
	}
	return remoting.NewResponse(req, remoting.Success, "")
}

func (b *Broker) handleDeleteTopic(c *remoting.Conn, req *remoting.Command) *remoting.Command {
	topic := req.Get("topic")
	if topic == AutoCreateTopicKey || systemTopic(topic) {
		return response(req, remoting.NoPermission, "topic %s is reserved", topic)
	}
	if topic == b.topics.replyTopic {
		return response(req, remoting.NoPermission, "topic %s is the cluster's reply topic; request-reply needs it", topic)
	}
	if err := b.DeleteTopic(topic); err != nil {
		return response(req, remoting.SystemError, "%v", err)
	}
	return remoting.NewResponse(req, remoting.Success, "")
}

// DeleteTopic deletes a topic as DELETE_TOPIC_IN_BROKER does: its
// configuration (and with it its route, at the re-registration that
// follows), its queues and every group's offsets on it, durably, then
// the pulls held on it and its pre-filter state; for a LITE topic, its
// lite topics too. A topic created again under the name starts empty. A group's retry and dead-letter topics
// are topics of their own and stay.
func (b *Broker) DeleteTopic(topic string) error {
	if err := ValidateTopic(topic); err != nil {
		return err
	}
	if err := b.topics.delete(topic); err != nil {
		return err
	}
	if err := b.store.DeleteTopic(topic); err != nil {
		return err
	}
	if err := b.deleteLiteTopics(topic); err != nil {
		return err
	}
	b.pulled.Range(func(k, _ any) bool {
		if k.(pullKey).topic == topic {
			b.pulled.Delete(k)
		}
		return true
	})
	b.holds.releaseTopic(topic)
	b.prefilter.drop(topic)
	b.pop.dropTopic(topic)
	b.log.Info("topic data deleted", "topic", topic)
	return nil
}

func intField(req *remoting.Command, key string, def int) (int, error) {
	v, err := req.Int32Or(key, int32(def))
	return int(v), err
}

// Topics returns a copy of the topic table.
func (b *Broker) Topics() map[string]TopicConfig {
	m, _ := b.topics.snapshot()
	return m
}

// CreateTopic creates or updates a topic, as UPDATE_AND_CREATE_TOPIC does.
func (b *Broker) CreateTopic(tc TopicConfig) error { return b.topics.put(tc) }

// MessageTypes are the message types a topic may be limited to (RocketMQ
// 5's "+message.type" attribute); MIXED, like no type, accepts the first
// four. A PRIORITY topic's queues are its messages' priorities (see
// MessageTypePriority); a LITE topic holds lite topics (lite.go).
var MessageTypes = []string{"NORMAL", "FIFO", "DELAY", "TRANSACTION", "MIXED", MessageTypePriority, MessageTypeLite}

// MessageTypePriority is the type of a topic of priority messages. A
// message's priority (message.PropertyPriority, 0 the lowest) is the
// queue it is stored in, the topic's highest queue for a priority beyond
// it, and POP receives of a group that is not FIFO take the highest
// queues first.
const MessageTypePriority = "PRIORITY"

// maxLiteExpiration is the longest lite.topic.expiration, in minutes: a
// year.
const maxLiteExpiration = 365 * 24 * 60

// applyTopicAttributes applies the attributes of UPDATE_AND_CREATE_TOPIC
// to tc, as RocketMQ 5 does: comma-separated, "+name=value" sets one,
// "-name" removes it, and those not named keep their values. It knows
// message.type (MessageTypes) and lite.topic.expiration (minutes a lite
// topic lives after its last message, -1 for ever, a LITE topic's);
// others are ignored, as this broker has no use for them.
func applyTopicAttributes(tc *TopicConfig, attrs string) error {
	for a := range strings.SplitSeq(attrs, ",") {
		k, v, _ := strings.Cut(strings.TrimSpace(a), "=")
		switch k {
		case "+message.type":
			typ := strings.ToUpper(v)
			if !slices.Contains(MessageTypes, typ) {
				return fmt.Errorf("message type %q is not one of %s", v, strings.Join(MessageTypes, ", "))
			}
			tc.MessageType = typ
		case "-message.type":
			tc.MessageType = ""
		case "+lite.topic.expiration":
			n, err := strconv.Atoi(v)
			if err != nil || n != -1 && (n < 1 || n > maxLiteExpiration) {
				return fmt.Errorf("lite.topic.expiration %q: want minutes, 1 to %d, or -1 for ever", v, maxLiteExpiration)
			}
			tc.LiteExpiration = max(n, 0)
		case "-lite.topic.expiration":
			tc.LiteExpiration = 0
		}
	}
	if tc.LiteExpiration != 0 && tc.MessageType != MessageTypeLite {
		return fmt.Errorf("lite.topic.expiration is a LITE topic's; %s is of type %q", tc.TopicName, tc.MessageType)
	}
	return nil
}

// stored reads one topic's configuration from the store, bypassing the
// table: a replica's view of a topic its leader created since the table
// was last reloaded.
func (t *topicTable) stored(topic string) (TopicConfig, bool, error) {
	v, err := t.store.Meta(topicMetaKey + topic)
	if errors.Is(err, store.ErrNotFound) {
		return TopicConfig{}, false, nil
	}
	if err != nil {
		return TopicConfig{}, false, fmt.Errorf("broker: read topic config %s: %w", logName(topic), err)
	}
	var tc TopicConfig
	if err := json.Unmarshal(v, &tc); err != nil {
		return TopicConfig{}, false, fmt.Errorf("broker: topic config %s: %w", logName(topic), err)
	}
	return tc, true, nil
}

// reload reads the topic table from the store again, for a replica whose
// leader changes topics: the topics stored there replace those in memory,
// and the ones kept only in memory (the template and reply topics a
// replica does not store) stay. It reports whether anything changed.
func (t *topicTable) reload() (bool, error) {
	stored := map[string]TopicConfig{}
	err := t.store.EachMeta(topicMetaKey, func(name string, v []byte) error {
		var tc TopicConfig
		if err := json.Unmarshal(v, &tc); err != nil {
			return fmt.Errorf("broker: topic config %s: %w", name, err)
		}
		stored[tc.TopicName] = tc
		return nil
	})
	if err != nil {
		return false, err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, name := range []string{AutoCreateTopicKey, t.replyTopic} {
		if tc, ok := t.topics[name]; ok {
			if _, ok := stored[name]; !ok {
				stored[name] = tc
			}
		}
	}
	if maps.Equal(stored, t.topics) {
		return false, nil
	}
	t.topics = stored
	t.changedLocked()
	return true, nil
}
