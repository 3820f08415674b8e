package metrics

import (
	"cmp"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/rmq-go/rmq/core/broker"
	"github.com/rmq-go/rmq/core/cluster"
	"github.com/rmq-go/rmq/core/store"
	"github.com/rmq-go/rmq/internal/grpcserver"
	"github.com/rmq-go/rmq/internal/histogram"
	"github.com/rmq-go/rmq/plugins/natsbridge"
	"github.com/rmq-go/rmq/plugins/wasm"
)

// Defaults of Options fields left zero.
const (
	DefaultMaxTopics    = 1000
	DefaultMaxGroups    = 1000
	DefaultMaxLagSeries = 10000
)

// Other is the label value that series over the caps are summed into.
const Other = "_other"

// Options configures a Collector. Zero values mean the documented default.
type Options struct {
	// Store, Broker are the broker process's; required unless Source is
	// set.
	Store  *store.Store
	Broker *broker.Broker
	// Source, if set, is asked for the store and broker at each scrape
	// instead: a replicated set's member runs its broker only while it
	// leads, and a snapshot may replace its store. A nil broker leaves the
	// broker's series out.
	Source func() (*store.Store, *broker.Broker)
	// Cluster, if set, returns the member's view of its replicated set,
	// for the rmq_cluster_* series.
	Cluster func() cluster.Status
	// Plugins are the WASM plugins; nil when there are none.
	Plugins *wasm.Registry
	// Bridge returns the running NATS bridge, or nil.
	Bridge func() *natsbridge.Bridge
	// GRPC counts the gRPC endpoint's responses; nil without one.
	GRPC *grpcserver.Counts
	// MaxTopics and MaxGroups cap the topics and groups with series of
	// their own. Default 1,000 each.
	MaxTopics, MaxGroups int
	// MaxLagSeries caps the consumer lag series. Default 10,000.
	MaxLagSeries int
}

// Collector is a prometheus.Collector of one broker process.
type Collector struct {
	opts Options

	// mu serialises scrapes: they share the snapshot buffers and the
	// sets of names with series.
	mu     sync.Mutex
	snap   broker.Metrics
	hist   histogram.Snapshot
	topics capped
	groups capped
	lag    map[lagKey]int64
	cum    []uint64
}

// New returns a collector reading o's components.
func New(o Options) *Collector {
	if o.Source == nil && (o.Store == nil || o.Broker == nil) {
		panic("metrics: Store and Broker are required")
	}
	if o.MaxTopics <= 0 {
		o.MaxTopics = DefaultMaxTopics
	}
	if o.MaxGroups <= 0 {
		o.MaxGroups = DefaultMaxGroups
	}
	if o.MaxLagSeries <= 0 {
		o.MaxLagSeries = DefaultMaxLagSeries
	}
	return &Collector{
		opts:   o,
		topics: newCapped(o.MaxTopics),
		groups: newCapped(o.MaxGroups),
		lag:    map[lagKey]int64{},
	}
}

func desc(name, help string, labels ...string) *prometheus.Desc {
	return prometheus.NewDesc(name, help, labels, nil)
}

// The series, by component. Names follow Prometheus' conventions: the
// rmq_ prefix, base units (seconds, bytes), _total on counters.
var (
	topicMsgsIn   = desc("rmq_topic_messages_in_total", "Messages stored by sends, by the topic the send named.", "topic")
	topicBytesIn  = desc("rmq_topic_bytes_in_total", "Message body bytes stored by sends.", "topic")
	topicMsgsOut  = desc("rmq_topic_messages_out_total", "Messages served to pulls.", "topic")
	topicBytesOut = desc("rmq_topic_bytes_out_total", "Message body bytes served to pulls.", "topic")
	sendDuration  = desc("rmq_send_duration_seconds", "Time from a send's arrival to its messages being stored (fsynced under sync flush).")
	pullDuration  = desc("rmq_pull_duration_seconds", "Time to answer a pull that was not held.")
	consumerLag   = desc("rmq_consumer_lag_messages", "A queue's max offset minus the group's committed offset.", "group", "topic", "queue")
	heldPulls     = desc("rmq_held_pulls", "Long-polling pulls waiting for messages.")
	connections   = desc("rmq_connections", "Open client connections.")
	partialFrames = desc("rmq_remoting_partial_frame_bytes", "Bytes held by request frames still arriving, over all connections (bounded by remoting.maxPartialFrameBytes).")
	queuedResp    = desc("rmq_remoting_queued_response_bytes", "Response bytes built or set aside and not yet written, over all connections (bounded by remoting.maxQueuedBytes).")
	framesDropped = desc("rmq_remoting_stalled_frames_dropped_total", "Connections closed because their stalled partial frames held the budget others needed.")
	clients       = desc("rmq_clients", "Clients known by heartbeat.", "kind")
	retries       = desc("rmq_retries_total", "Messages sent back for a retry.")
	deadLettered  = desc("rmq_dead_letters_total", "Messages moved to a dead-letter topic.")
	dlqMessages   = desc("rmq_dlq_messages", "Messages held in a group's dead-letter topic.", "group")
	delayed       = desc("rmq_delayed_messages_pending", "Delayed messages and retries waiting for their delay level.")
	timedParked   = desc("rmq_timed_messages_parked_total", "Timed messages ever parked in the timer topic.")
	timedPending  = desc("rmq_timed_messages_pending", "Timed messages waiting for their delivery time.")
	recalled      = desc("rmq_recalled_messages_total", "Delayed and timed messages recalled before their delivery.")
	grpcResponses = desc("rmq_grpc_responses_total", "Responses of the RocketMQ 5 gRPC service, by method and Status code.", "method", "code")
	txnPending    = desc("rmq_transactions_pending", "Half messages awaiting their commit or rollback.")
	liteTopics    = desc("rmq_lite_topics", "Lite topics whose queues the store holds, of every LITE topic (bounded by maxLiteTopics).")
	txnChecks     = desc("rmq_transaction_checks_total", "Transaction state checks sent to producers.")
	filterEvals   = desc("rmq_filter_evaluations_total", "Records evaluated by a pull's property filter or filter plugin.")
	filterErrors  = desc("rmq_filter_errors_total", "Filter failures during pulls.")
	prefilterSkip = desc("rmq_prefilter_skips_total", "Records pulls skipped on their pre-computed match mask, unread.")
	folded        = desc("rmq_metrics_folded", "Names summed into the _other series at the last scrape, by label.", "label")

	storeAppends      = desc("rmq_store_messages_appended_total", "Records appended to the commit log.")
	storeBytes        = desc("rmq_store_bytes_appended_total", "Record bytes appended to the commit log.")
	storeRounds       = desc("rmq_store_flush_rounds_total", "Group-commit rounds written.")
	storeRoundSize    = desc("rmq_store_round_messages", "Records per group-commit round.")
	storeFsyncs       = desc("rmq_store_fsyncs_total", "Commit-log fsyncs.")
	storeFsyncTime    = desc("rmq_store_fsync_duration_seconds", "Duration of a commit-log fsync.")
	storeFsyncBytes   = desc("rmq_store_fsync_bytes", "Bytes made durable by one fsync.")
	storeSegments     = desc("rmq_store_segments", "Commit-log segment files.")
	storeLogBytes     = desc("rmq_store_commitlog_bytes", "Bytes of the retained commit log.")
	storeIndexBytes   = desc("rmq_store_index_bytes", "Bytes of the index's files.")
	storeDeleted      = desc("rmq_store_segments_deleted_total", "Commit-log segments deleted by retention.")
	storeHeld         = desc("rmq_store_retention_held_total", "Retention passes that kept a segment, by reason.", "reason")
	storeDropped      = desc("rmq_store_unconsumed_dropped_total", "Unconsumed messages deleted above the disk high water.")
	storeCorruptions  = desc("rmq_store_corruptions_total", "Invalid records found on read or recovery.")
	storeKeyIndexFail = desc("rmq_store_key_index_failures_total", "Key-index writes that failed; the key index then stops until a restart.")
	storeDiskFull     = desc("rmq_store_disk_full", "1 while sends are refused because the disk has less free space than the store keeps.")
	storeDiskUsed     = desc("rmq_store_disk_used_ratio", "Fraction of the data directory's filesystem in use, read at the scrape.")
	storeHighWater    = desc("rmq_store_disk_high_water_ratio", "The store's diskHighWater: above it, retention deletes the oldest segments early (0 or less: never).")

	pluginCalls    = desc("rmq_plugin_calls_total", "Calls into a WASM plugin.", "plugin", "kind")
	pluginRecords  = desc("rmq_plugin_records_total", "Records passed to a WASM plugin.", "plugin", "kind")
	pluginErrors   = desc("rmq_plugin_errors_total", "Failed plugin calls, traps and timeouts included.", "plugin", "kind")
	pluginTraps    = desc("rmq_plugin_traps_total", "Plugin calls that trapped.", "plugin", "kind")
	pluginTimeouts = desc("rmq_plugin_timeouts_total", "Plugin calls that timed out.", "plugin", "kind")
	pluginRejected = desc("rmq_plugin_rejected_total", "Messages a transform plugin refused (their sends were refused whole).", "plugin", "kind")
	pluginDisabled = desc("rmq_plugin_disabled", "1 while a plugin is disabled after repeated failures.", "plugin", "kind")
	pluginDuration = desc("rmq_plugin_call_duration_seconds", "Duration of one plugin operation (a Match batch, an Allocate, a TxnCheck, a Transform of one send).", "plugin", "kind")

	bridgeConnected  = desc("rmq_natsbridge_connected", "1 while the NATS bridge is connected.")
	bridgeLagEvents  = desc("rmq_natsbridge_lag_events", "Outbox events not yet acknowledged by NATS.")
	bridgeLagSeconds = desc("rmq_natsbridge_lag_seconds", "Age of the oldest outbox event not yet acknowledged.")
	bridgeInFlight   = desc("rmq_natsbridge_in_flight", "Publishes awaiting their acknowledgement.")
	bridgePublished  = desc("rmq_natsbridge_published_total", "Events acknowledged by NATS as new.")
	bridgeDuplicates = desc("rmq_natsbridge_duplicates_total", "Events NATS already held (republished).")
	bridgeFailures   = desc("rmq_natsbridge_failures_total", "Times publishing stopped and rewound.")
	bridgeDropped    = desc("rmq_natsbridge_dropped_total", "Events never published, by reason.", "reason")
	bridgeResends    = desc("rmq_natsbridge_resends_total", "Dead letters resent over NATS.")

	descClusterLeader    = desc("rmq_cluster_leader", "1 while this member leads its replicated broker set.", "set", "node")
	descClusterTerm      = desc("rmq_cluster_term", "The raft term this member is in.", "set", "node")
	descClusterCommit    = desc("rmq_cluster_commit_index", "The last raft entry this member knows committed.", "set", "node")
	descClusterApplied   = desc("rmq_cluster_applied_index", "The last raft entry this member's store applied.", "set", "node")
	descClusterSnapshots = desc("rmq_cluster_snapshots_installed_total", "Snapshots this member installed from the leader.", "set", "node")
	descClusterFailed    = desc("rmq_cluster_failed", "1 once this member's store failed and it left its set, until restarted.", "set", "node")
	descClusterLogSpan   = desc("rmq_cluster_log_span_seconds", "How long ago this member's raft log's first entry was appended: on the leader, how long a member may be away and catch up from the log.", "set", "node")
)

var all = []*prometheus.Desc{
	topicMsgsIn, topicBytesIn, topicMsgsOut, topicBytesOut, sendDuration, pullDuration, consumerLag,
	heldPulls, connections, partialFrames, queuedResp, framesDropped, clients, retries, deadLettered, dlqMessages, delayed, timedParked, timedPending, recalled,
	txnPending, liteTopics, txnChecks, filterEvals, filterErrors, prefilterSkip, folded,
	storeAppends, storeBytes, storeRounds, storeRoundSize, storeFsyncs, storeFsyncTime, storeFsyncBytes,
	storeSegments, storeLogBytes, storeIndexBytes, storeDeleted, storeHeld, storeDropped, storeCorruptions, storeKeyIndexFail, storeDiskFull, storeDiskUsed, storeHighWater,
	pluginCalls, pluginRecords, pluginErrors, pluginTraps, pluginTimeouts, pluginRejected, pluginDisabled, pluginDuration,
	bridgeConnected, bridgeLagEvents, bridgeLagSeconds, bridgeInFlight, bridgePublished, bridgeDuplicates,
	bridgeFailures, bridgeDropped, bridgeResends,
	descClusterLeader, descClusterTerm, descClusterCommit, descClusterApplied, descClusterSnapshots, descClusterFailed,
	descClusterLogSpan, grpcResponses,
}

// Describe sends every series' description.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range all {
		ch <- d
	}
}

// Collect reads the components' snapshots and sends the series.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	defer c.mu.Unlock()
	st, b := c.opts.Store, c.opts.Broker
	if c.opts.Source != nil {
		st, b = c.opts.Source()
	}
	if b != nil {
		c.collectBroker(ch, b)
	}
	c.collectStore(ch, st)
	c.collectPlugins(ch)
	c.collectBridge(ch)
	c.collectCluster(ch)
	if c.opts.GRPC != nil {
		c.opts.GRPC.Each(func(method, code string, n int64) { counter(ch, grpcResponses, n, method, code) })
	}
}

// collectCluster sends a replicated set's member's series.
func (c *Collector) collectCluster(ch chan<- prometheus.Metric) {
	if c.opts.Cluster == nil {
		return
	}
	s := c.opts.Cluster()
	leader := int64(0)
	if s.State == "Leader" {
		leader = 1
	}
	gauge(ch, descClusterLeader, leader, s.Set, s.Node)
	gauge(ch, descClusterTerm, int64(s.Term), s.Set, s.Node)
	gauge(ch, descClusterCommit, int64(s.CommitIndex), s.Set, s.Node)
	gauge(ch, descClusterApplied, int64(s.AppliedIndex), s.Set, s.Node)
	counter(ch, descClusterSnapshots, s.SnapshotsInstalled, s.Set, s.Node)
	failed := int64(0)
	if s.Failed != "" {
		failed = 1
	}
	gauge(ch, descClusterFailed, failed, s.Set, s.Node)
	if span, err := time.ParseDuration(s.LogSpan); err == nil {
		gauge(ch, descClusterLogSpan, int64(span.Seconds()), s.Set, s.Node)
	}
}

func counter(ch chan<- prometheus.Metric, d *prometheus.Desc, v int64, labels ...string) {
	ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
}

func gauge(ch chan<- prometheus.Metric, d *prometheus.Desc, v int64, labels ...string) {
	ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, float64(v), labels...)
}

// hist sends a histogram snapshot, its values divided by scale (1e9 turns
// nanoseconds into seconds).
func hist(ch chan<- prometheus.Metric, d *prometheus.Desc, s *histogram.Snapshot, scale float64, labels ...string) {
	buckets := make(map[float64]uint64, len(s.Bounds))
	var cum uint64
	for i, b := range s.Bounds {
		cum += s.Counts[i]
		buckets[float64(b)/scale] = cum
	}
	ch <- prometheus.MustNewConstHistogram(d, s.Count, float64(s.Sum)/scale, buckets, labels...)
}

type topicSums struct{ msgsIn, bytesIn, msgsOut, bytesOut int64 }

func (c *Collector) collectBroker(ch chan<- prometheus.Metric, b *broker.Broker) {
	m := &c.snap
	b.Metrics(m)

	// Topics: admit names while there is room, sum the rest.
	c.topics.begin()
	c.groups.begin()
	for _, t := range m.Topics {
		c.topics.see(t.Topic)
	}
	for _, e := range m.Lag {
		c.topics.see(e.Topic)
		c.groups.see(e.Group)
	}
	for _, d := range m.DeadLetters {
		c.groups.see(d.Group)
	}
	c.topics.end()
	c.groups.end()
	var other topicSums
	for _, t := range m.Topics {
		if !c.topics.has(t.Topic) {
			other.msgsIn += t.MessagesIn
			other.bytesIn += t.BytesIn
			other.msgsOut += t.MessagesOut
			other.bytesOut += t.BytesOut
			continue
		}
		counter(ch, topicMsgsIn, t.MessagesIn, t.Topic)
		counter(ch, topicBytesIn, t.BytesIn, t.Topic)
		counter(ch, topicMsgsOut, t.MessagesOut, t.Topic)
		counter(ch, topicBytesOut, t.BytesOut, t.Topic)
	}
	if c.topics.folded > 0 {
		counter(ch, topicMsgsIn, other.msgsIn, Other)
		counter(ch, topicBytesIn, other.bytesIn, Other)
		counter(ch, topicMsgsOut, other.msgsOut, Other)
		counter(ch, topicBytesOut, other.bytesOut, Other)
	}
	hist(ch, sendDuration, &m.Send, 1e9)
	hist(ch, pullDuration, &m.Pull, 1e9)

	c.collectLag(ch, m)

	dlq := map[string]int64{}
	for _, d := range m.DeadLetters {
		dlq[c.groups.label(d.Group)] += d.N
	}
	for g, n := range dlq {
		gauge(ch, dlqMessages, n, g)
	}
	gauge(ch, folded, int64(c.topics.folded), "topic")
	gauge(ch, folded, int64(c.groups.folded), "group")

	gauge(ch, heldPulls, int64(m.HeldPulls))
	gauge(ch, connections, int64(m.Connections))
	gauge(ch, partialFrames, m.Remoting.PartialFrameBytes)
	gauge(ch, queuedResp, m.Remoting.QueuedBytes)
	counter(ch, framesDropped, m.Remoting.FramesDropped)
	gauge(ch, clients, int64(m.Producers), "producer")
	gauge(ch, clients, int64(m.Consumers), "consumer")
	counter(ch, retries, m.Retries)
	counter(ch, deadLettered, m.DeadLettered)
	gauge(ch, delayed, m.DelayedPending)
	counter(ch, timedParked, m.TimedParked)
	gauge(ch, timedPending, m.TimedPending)
	counter(ch, recalled, m.Recalled)
	gauge(ch, txnPending, int64(m.TxnPending))
	gauge(ch, liteTopics, int64(m.LiteTopics))
	counter(ch, txnChecks, m.TxnChecks)
	counter(ch, filterEvals, m.FilterEvals)
	counter(ch, filterErrors, m.FilterErrors)
	counter(ch, prefilterSkip, m.Prefiltered)
}

// lagKey is one lag series.
type lagKey struct {
	group, topic string
	queue        int32 // -1: every queue (queue="_all")
}

// collectLag sends the lag series: one per group, topic and queue within
// the caps, in a stable order so the same ones stay under MaxLagSeries.
func (c *Collector) collectLag(ch chan<- prometheus.Metric, m *broker.Metrics) {
	slices.SortFunc(m.Lag, func(a, b broker.QueueLag) int {
		return cmp.Or(cmp.Compare(a.Group, b.Group), cmp.Compare(a.Topic, b.Topic), cmp.Compare(a.QueueID, b.QueueID))
	})
	clear(c.lag)
	for _, e := range m.Lag {
		k := lagKey{c.groups.label(e.Group), c.topics.label(e.Topic), e.QueueID}
		if _, ok := c.lag[k]; !ok && len(c.lag) >= c.opts.MaxLagSeries {
			k.topic, k.queue = Other, -1
		}
		c.lag[k] += e.Lag
	}
	for k, v := range c.lag {
		q := "_all"
		if k.queue >= 0 {
			q = strconv.Itoa(int(k.queue))
		}
		gauge(ch, consumerLag, v, k.group, k.topic, q)
	}
}

func (c *Collector) collectStore(ch chan<- prometheus.Metric, s *store.Store) {
	st := s.Stats()
	counter(ch, storeAppends, st.Appends.Load())
	counter(ch, storeBytes, st.AppendedBytes.Load())
	counter(ch, storeRounds, st.Rounds.Load())
	counter(ch, storeFsyncs, st.Fsyncs.Load())
	counter(ch, storeDeleted, st.SegmentsFreed.Load())
	counter(ch, storeHeld, st.SegmentsHeld.Load(), "floor")
	counter(ch, storeHeld, st.HighWaterHeld.Load(), "unconsumed")
	counter(ch, storeDropped, st.UnconsumedDropped.Load())
	counter(ch, storeCorruptions, st.Corruptions.Load())
	counter(ch, storeKeyIndexFail, st.KeyIndexFailures.Load())
	full := int64(0)
	if s.DiskFull() {
		full = 1
	}
	gauge(ch, storeDiskFull, full)
	if used, high, err := s.DiskFill(); err == nil {
		ch <- prometheus.MustNewConstMetric(storeDiskUsed, prometheus.GaugeValue, used)
		ch <- prometheus.MustNewConstMetric(storeHighWater, prometheus.GaugeValue, high)
	}
	st.RoundMessages.Snapshot(&c.hist)
	hist(ch, storeRoundSize, &c.hist, 1)
	st.FsyncDuration.Snapshot(&c.hist)
	hist(ch, storeFsyncTime, &c.hist, 1e9)
	st.FsyncBytes.Snapshot(&c.hist)
	hist(ch, storeFsyncBytes, &c.hist, 1)
	u := s.DiskUsage()
	gauge(ch, storeSegments, int64(u.Segments))
	gauge(ch, storeLogBytes, u.CommitLogBytes)
	gauge(ch, storeIndexBytes, u.IndexBytes)
}

// pluginBounds are the plugin latency buckets.
var pluginBounds = func() []time.Duration {
	out := make([]time.Duration, len(histogram.Durations))
	for i, d := range histogram.Durations {
		out[i] = time.Duration(d)
	}
	return out
}()

func (c *Collector) collectPlugins(ch chan<- prometheus.Metric) {
	if c.opts.Plugins == nil {
		return
	}
	for _, p := range c.opts.Plugins.Plugins() {
		s := p.Stats()
		name, kind := s.Name, string(s.Kind)
		counter(ch, pluginCalls, int64(s.Calls), name, kind)
		counter(ch, pluginRecords, int64(s.Records), name, kind)
		counter(ch, pluginErrors, int64(s.Errors), name, kind)
		counter(ch, pluginTraps, int64(s.Traps), name, kind)
		counter(ch, pluginTimeouts, int64(s.Timeouts), name, kind)
		counter(ch, pluginRejected, int64(s.Rejected), name, kind)
		var off int64
		if s.Disabled {
			off = 1
		}
		gauge(ch, pluginDisabled, off, name, kind)
		var count uint64
		var sum time.Duration
		c.cum, count, sum = p.Latency(pluginBounds, c.cum)
		buckets := make(map[float64]uint64, len(pluginBounds))
		for i, b := range pluginBounds {
			buckets[b.Seconds()] = c.cum[i]
		}
		ch <- prometheus.MustNewConstHistogram(pluginDuration, count, sum.Seconds(), buckets, name, kind)
	}
}

func (c *Collector) collectBridge(ch chan<- prometheus.Metric) {
	if c.opts.Bridge == nil {
		return
	}
	b := c.opts.Bridge()
	if b == nil {
		return
	}
	s := b.Status()
	var up int64
	if s.Connection == "CONNECTED" {
		up = 1
	}
	gauge(ch, bridgeConnected, up)
	gauge(ch, bridgeLagEvents, s.LagEvents)
	ch <- prometheus.MustNewConstMetric(bridgeLagSeconds, prometheus.GaugeValue, s.LagSeconds)
	gauge(ch, bridgeInFlight, s.InFlight)
	counter(ch, bridgePublished, s.Published)
	counter(ch, bridgeDuplicates, s.Duplicates)
	counter(ch, bridgeFailures, s.Failures)
	counter(ch, bridgeDropped, s.Expired, "expired")
	counter(ch, bridgeDropped, s.Filtered, "filtered")
	counter(ch, bridgeDropped, s.Unreadable, "unreadable")
	counter(ch, bridgeResends, s.Resends)
}

// capped is a set of at most max label values with series of their own.
// A value stays in once admitted, while the broker still reports it.
type capped struct {
	max    int
	in     map[string]bool // admitted → seen at this scrape
	folded int             // values seen at this scrape and not admitted
	over   map[string]struct{}
}

func newCapped(max int) capped {
	return capped{max: max, in: map[string]bool{}, over: map[string]struct{}{}}
}

// begin starts a scrape.
func (c *capped) begin() {
	for k := range c.in {
		c.in[k] = false
	}
	clear(c.over)
	c.folded = 0
}

// see notes a value present at this scrape. Values are admitted in the
// order seen, which is stable enough: once in, a value stays.
func (c *capped) see(v string) {
	if _, ok := c.in[v]; ok {
		c.in[v] = true
		return
	}
	c.over[v] = struct{}{}
}

// end drops the values no longer present and admits the new ones that
// fit; the rest are folded.
func (c *capped) end() {
	for k, seen := range c.in {
		if !seen {
			delete(c.in, k)
		}
	}
	news := make([]string, 0, len(c.over))
	for v := range c.over {
		if _, ok := c.in[v]; !ok {
			news = append(news, v)
		}
	}
	slices.Sort(news) // a stable choice of which new names fit
	c.folded = 0
	for _, v := range news {
		if len(c.in) < c.max {
			c.in[v] = true
			delete(c.over, v)
		} else {
			c.folded++
		}
	}
}

func (c *capped) has(v string) bool { _, ok := c.in[v]; return ok }

func (c *capped) label(v string) string {
	if c.has(v) {
		return v
	}
	return Other
}
