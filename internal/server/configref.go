package server

import (
	"encoding"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/rmq-go/rmq/core/broker"
	"github.com/rmq-go/rmq/core/cluster"
	"github.com/rmq-go/rmq/core/namesrv"
	"github.com/rmq-go/rmq/core/outbox"
	"github.com/rmq-go/rmq/core/remoting"
	"github.com/rmq-go/rmq/core/store"
	"github.com/rmq-go/rmq/internal/grpcserver"
	"github.com/rmq-go/rmq/plugins/natsbridge"
	"github.com/rmq-go/rmq/plugins/wasm"
)

// The config reference (broker config defaults, docs/config.md) is made
// here from the same struct fields the loader (config.go) reads: each key
// is found by walking Config's yaml tags, its default comes from
// CommandDefaults, and its one-line description from configDocs
// (configdocs.go), which a test keeps in step with the keys.

// ConfigKey is one key of the config file, as the reference lists it.
type ConfigKey struct {
	// Key is the key's dotted path: store.flush, cluster.peers[].addr.
	Key string
	// Type is how the file writes the value: string, bool, int, size,
	// duration, float, level, list of strings, map, or any (JSON).
	Type string
	// Default is the value's YAML text: the broker command's default for
	// a key of a section that is on by default, else the value written
	// when the key is left out ("" for a required string).
	Default string
	// Doc is the key's one-line description.
	Doc string
	// Optional marks a key of a section that is off unless written
	// (cluster, natsBridge) or of an entry of a list.
	Optional bool
	// Section marks a key holding a section or a list of entries; the
	// keys under it follow.
	Section bool

	name  string // the key as written in its section
	depth int
}

// CommandDefaults returns the config the broker command runs with when
// neither the file nor a flag sets anything, with each component's
// default written out in place of the zero value that stands for it.
func CommandDefaults() Config {
	delay, _ := broker.ParseDelayLevels(broker.DefaultDelayLevels)
	return Config{
		DataDir:       DefaultDataDir,
		Listen:        DefaultListen,
		VIPListen:     DefaultVIPListen,
		NamesrvListen: DefaultNamesrvListen,
		GRPCListen:    DefaultGRPCListen,
		HTTPListen:    DefaultHTTPListen,
		HTTPMaxConns:  DefaultHTTPMaxConns,
		GRPC: grpcserver.Options{
			MaxSessions:           grpcserver.DefaultMaxSessions,
			MaxConns:              grpcserver.DefaultMaxConns,
			MaxStreams:            grpcserver.DefaultMaxStreams,
			MaxWaiting:            grpcserver.DefaultMaxWaiting,
			LiteSubscriptionQuota: grpcserver.DefaultLiteQuota,
			SessionExpiry:         grpcserver.DefaultSessionExpiry,
			LongPolling:           grpcserver.DefaultLongPolling,
		},
		Store: store.Options{
			SegmentSize:         store.DefaultSegmentSize,
			Flush:               store.FlushSync,
			FlushInterval:       store.DefaultFlushInterval,
			CheckpointInterval:  store.DefaultCheckpointInterval,
			Retention:           store.DefaultRetention,
			RetentionInterval:   store.DefaultRetentionInterval,
			DiskHighWater:       store.DefaultDiskHighWater,
			DiskReserve:         store.DefaultDiskReserve,
			MaxPendingBytes:     store.DefaultMaxPendingBytes,
			IndexCacheSize:      store.DefaultIndexCacheSize,
			IndexMemTableSize:   store.DefaultIndexMemTableSize,
			KeyIndexFileEntries: store.DefaultKeyIndexFileEntries,
			CacheWindow:         store.DefaultCacheWindow,
		},
		Broker: broker.Options{
			BrokerName:               broker.DefaultBrokerName,
			ClusterName:              broker.DefaultClusterName,
			RegisterInterval:         broker.DefaultRegisterInterval,
			DefaultTopicQueueNums:    broker.DefaultTopicQueueNums,
			MaxTopics:                broker.DefaultMaxTopics,
			MaxGroups:                broker.DefaultMaxGroups,
			MaxSubscriptionsPerGroup: broker.DefaultMaxSubscriptions,
			MaxLiteTopics:            broker.DefaultMaxLiteTopics,
			MaxMessageSize:           broker.DefaultMaxMessageSize,
			MaxBatchMessages:         broker.DefaultMaxBatchMessages,
			ClientExpiry:             broker.DefaultClientExpiry,
			MaxPullSuspend:           broker.DefaultMaxPullSuspend,
			MaxHeldPullsPerConn:      broker.DefaultMaxHeldPulls,
			PullMaxBytes:             broker.DefaultPullMaxBytes,
			FilterCacheMaxBytes:      broker.DefaultFilterCacheBytes,
			MaxFilterExpression:      broker.DefaultMaxFilterExpr,
			DelayLevels:              delay,
			MaxTimerDelay:            broker.DefaultMaxTimerDelay,
			OutboxMaxBytes:           broker.DefaultOutboxMaxBytes,
			QueueLockExpiry:          broker.DefaultQueueLockExpiry,
			TxnTimeout:               broker.DefaultTxnTimeout,
			TxnCheckInterval:         broker.DefaultTxnCheckInterval,
			TxnCheckMax:              broker.DefaultTxnCheckMax,
		},
		Remoting: remoting.ServerOptions{
			MaxFrameSize:          remoting.DefaultMaxFrameSize,
			MaxInflightPerConn:    4096,
			MaxQueuedBytesPerConn: 64 << 20,
			MaxQueuedBytes:        remoting.DefaultMaxQueuedBytes,
			MaxPartialFrameBytes:  remoting.DefaultMaxPartialFrameBytes,
			WriteTimeout:          30 * time.Second,
			FrameReadTimeout:      10 * time.Second,
			IdleTimeout:           120 * time.Second,
			MaxConnsPerAddr:       1000,
		},
		EmbeddedNamesrv:  namesrv.Options{BrokerExpiry: namesrv.DefaultBrokerExpiry},
		TLS:              TLSOptions{Mode: TLSPermissive},
		MetricsMaxTopics: 1000,
		MetricsMaxGroups: 1000,
		LogLevel:         slog.LevelInfo,
		LogFormat:        LogText,
	}
}

// optionalDefaults are the values shown for the keys of sections that are
// off unless written and of list entries: what a key left out of them
// stands for.
var optionalDefaults = map[reflect.Type]any{
	reflect.TypeFor[cluster.Options](): cluster.Options{
		HeartbeatTimeout:   time.Second,
		ElectionTimeout:    time.Second,
		LeaderLeaseTimeout: 500 * time.Millisecond,
		SnapshotThreshold:  1024,
		TrailingLogs:       1024,
		SnapshotInterval:   2 * time.Minute,
		TrailingDuration:   cluster.DefaultTrailingDuration,
		TrailingBytes:      cluster.DefaultTrailingBytes,
	},
	reflect.TypeFor[natsbridge.Options](): natsbridge.Options{
		Mode:            natsbridge.ModeJetStream,
		Stream:          natsbridge.DefaultStream,
		Kinds:           []string{outbox.KindRetry, outbox.KindDLQ},
		StreamMaxAge:    natsbridge.DefaultStreamMaxAge,
		DuplicateWindow: natsbridge.DefaultDuplicateWindow,
		StreamReplicas:  1,
		SubjectPrefix:   natsbridge.DefaultSubjectPrefix,
		BodyCap:         natsbridge.DefaultBodyCap,
		MaxInFlight:     natsbridge.DefaultMaxInFlight,
		PublishTimeout:  natsbridge.DefaultPublishTimeout,
		CursorInterval:  natsbridge.DefaultCursorInterval,
		ReconnectWait:   natsbridge.DefaultReconnectWait,
		BackoffMin:      natsbridge.DefaultBackoffMin,
		BackoffMax:      natsbridge.DefaultBackoffMax,
		ResendKeyTTL:    natsbridge.DefaultResendKeyTTL,
		NotFoundGrace:   natsbridge.DefaultNotFoundGrace,
	},
	reflect.TypeFor[Plugin](): Plugin{Options: wasm.Options{
		FailurePolicy:  wasm.PolicyHold,
		MaxMemoryPages: wasm.DefaultMaxMemoryPages,
		MaxBinarySize:  wasm.DefaultMaxBinarySize,
		MaxFailures:    wasm.DefaultMaxFailures,
	}},
	reflect.TypeFor[broker.TopicOptions](): broker.TopicOptions{Queues: broker.DefaultTopicQueueNums, Perm: 6},
	reflect.TypeFor[broker.GroupOptions](): broker.GroupOptions{RetryMaxTimes: broker.DefaultMaxReconsumeTimes, RetryQueueNums: 1},
}

// ConfigReference lists every key of the config file in the order the
// file is printed, with its type, default and description.
func ConfigReference() []ConfigKey { return configKeys(CommandDefaults()) }

// configKeys lists the keys of the config file with c's values.
func configKeys(c Config) []ConfigKey {
	var keys []ConfigKey
	walkKeys(reflect.ValueOf(c), "", 0, false, &keys)
	for i := range keys {
		keys[i].Doc = configDocs[keys[i].Key]
	}
	return keys
}

// walkKeys appends the keys of struct v, whose keys start with prefix.
func walkKeys(v reflect.Value, prefix string, depth int, optional bool, into *[]ConfigKey) {
	t := v.Type()
	for i := range t.NumField() {
		f := t.Field(i)
		name, opts, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if name == "-" || !f.IsExported() {
			continue
		}
		fv := v.Field(i)
		if opts == "inline" {
			walkKeys(fv, prefix, depth, optional, into)
			continue
		}
		if name == "" {
			name = strings.ToLower(f.Name)
		}
		key := prefix + name
		ft := f.Type
		switch {
		case ft.Kind() == reflect.Pointer && ft.Elem().Kind() == reflect.Struct:
			*into = append(*into, ConfigKey{Key: key, Type: "section", Default: "off", Optional: optional, Section: true, name: name, depth: depth})
			walkKeys(protoValue(ft.Elem()), key+".", depth+1, true, into)
		case ft.Kind() == reflect.Struct && !isScalar(ft):
			*into = append(*into, ConfigKey{Key: key, Type: "section", Optional: optional, Section: true, name: name, depth: depth})
			walkKeys(fv, key+".", depth+1, optional, into)
		case ft.Kind() == reflect.Slice && ft.Elem().Kind() == reflect.Struct:
			*into = append(*into, ConfigKey{Key: key, Type: "list", Default: "[]", Optional: optional, Section: true, name: name, depth: depth})
			walkKeys(protoValue(ft.Elem()), key+"[].", depth+1, true, into)
		default:
			*into = append(*into, ConfigKey{Key: key, Type: typeName(ft, f.Tag.Get("cfg")), Default: valueText(fv, f.Tag.Get("cfg")), Optional: optional, name: name, depth: depth})
		}
	}
}

// protoValue is the value shown for a section off by default or a list
// entry of type t.
func protoValue(t reflect.Type) reflect.Value {
	if p, ok := optionalDefaults[t]; ok {
		return reflect.ValueOf(p)
	}
	return reflect.New(t).Elem()
}

var (
	textUnmarshaler = reflect.TypeFor[encoding.TextUnmarshaler]()
	durationType    = reflect.TypeFor[time.Duration]()
)

// isScalar reports whether the file writes a value of type t as one
// scalar.
func isScalar(t reflect.Type) bool {
	return reflect.PointerTo(t).Implements(textUnmarshaler) || t == durationType
}

func typeName(t reflect.Type, cfg string) string {
	switch {
	case cfg == "size":
		return "size"
	case cfg == "json":
		return "any (JSON)"
	case t == durationType:
		return "duration"
	case t == reflect.TypeFor[slog.Level]():
		return "level"
	case reflect.PointerTo(t).Implements(textUnmarshaler):
		return "string"
	}
	switch t.Kind() {
	case reflect.String:
		return "string"
	case reflect.Bool:
		return "bool"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "int"
	case reflect.Float32, reflect.Float64:
		return "float"
	case reflect.Slice:
		if t.Elem().Kind() == reflect.String {
			return "list of strings"
		}
	case reflect.Map:
		return "map"
	}
	return t.String()
}

// valueText writes v as the config file would.
func valueText(v reflect.Value, cfg string) string {
	switch {
	case cfg == "not":
		return strconv.FormatBool(!v.Bool())
	case cfg == "size":
		return sizeText(v.Int())
	case cfg == "json":
		if v.Len() == 0 {
			return "null"
		}
		return scalarText(string(v.Bytes()))
	case v.Type() == durationType:
		return durationText(time.Duration(v.Int()))
	case v.Type() == reflect.TypeFor[slog.Level]():
		return strings.ToLower(v.Interface().(slog.Level).String())
	}
	if s, ok := v.Interface().(fmt.Stringer); ok {
		return scalarText(s.String())
	}
	switch v.Kind() {
	case reflect.String:
		return scalarText(v.String())
	case reflect.Slice:
		if v.Type().Elem().Kind() == reflect.String {
			items := make([]string, v.Len())
			for i := range items {
				items[i] = scalarText(v.Index(i).String())
			}
			return "[" + strings.Join(items, ", ") + "]"
		}
	case reflect.Map:
		if v.Len() == 0 {
			return "{}"
		}
	}
	b, err := yaml.Marshal(v.Interface())
	if err != nil {
		return fmt.Sprint(v.Interface())
	}
	return strings.TrimSpace(string(b))
}

// scalarText is s as a YAML scalar, quoted where YAML would read it as
// something other than that string.
func scalarText(s string) string {
	b, _ := yaml.Marshal(s)
	return strings.TrimSpace(string(b))
}

// sizeText writes n bytes with the largest unit that divides it.
func sizeText(n int64) string {
	switch {
	case n == 0:
		return "0"
	case n%(1<<30) == 0:
		return strconv.FormatInt(n>>30, 10) + "GiB"
	case n%(1<<20) == 0:
		return strconv.FormatInt(n>>20, 10) + "MiB"
	case n%(1<<10) == 0:
		return strconv.FormatInt(n>>10, 10) + "KiB"
	}
	return strconv.FormatInt(n, 10)
}

// durationText writes d without Go's trailing zero units (72h, not
// 72h0m0s).
func durationText(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// WriteDefaults writes the whole config file with every key at its
// default and its description as a comment. Sections that are off by
// default and list entries are written commented out, to be uncommented.
func WriteDefaults(w io.Writer) error {
	ew := &errWriter{w: w}
	fmt.Fprintln(ew, "# The broker's config file with every key at its default (broker config defaults).")
	fmt.Fprintln(ew, "# Flags override it; sections commented out are off unless written.")
	keys := ConfigReference()
	for i, k := range keys {
		indent := strings.Repeat("  ", k.depth)
		name := k.name
		lead := ""
		if k.Optional {
			lead = "# "
		}
		// The first key of a list entry opens it with "- ".
		if i > 0 && keys[i-1].Type == "list" && strings.HasPrefix(k.Key, keys[i-1].Key+"[].") {
			indent = strings.Repeat("  ", k.depth-1) + "- "
		} else if strings.Contains(k.Key, "[].") {
			indent = strings.Repeat("  ", k.depth)
		}
		switch {
		case k.Section && k.Type == "list":
			fmt.Fprintf(ew, "%s%s%s: []  # %s\n", lead, indent, name, k.Doc)
		case k.Section && k.Default == "off":
			fmt.Fprintf(ew, "%s# %s:  # %s\n", indent, name, k.Doc)
		case k.Section:
			fmt.Fprintf(ew, "%s%s%s:  # %s\n", lead, indent, name, k.Doc)
		default:
			if k.Optional {
				fmt.Fprintf(ew, "# %s%s: %s  # %s\n", indent, name, k.Default, k.Doc)
			} else {
				fmt.Fprintf(ew, "%s%s: %s  # %s\n", indent, name, k.Default, k.Doc)
			}
		}
	}
	return ew.err
}

// WriteMarkdown writes the config reference as a Markdown document
// (docs/config.md).
func WriteMarkdown(w io.Writer) error {
	ew := &errWriter{w: w}
	fmt.Fprint(ew, `# Config file reference

<!-- Generated by "broker config defaults --markdown"; do not edit. -->

The broker reads a YAML file given with `+"`--config FILE`"+`; flags override
it. Every key is optional; a key left out takes the default below. Sizes
are bytes or a number with a unit (`+"`4KiB`, `64MiB`, `1GiB`"+`), durations
Go's (`+"`500ms`, `30s`, `72h`"+`). An unknown key, a value of the wrong type
or one out of range is an error: `+"`broker config check FILE`"+` lists every
problem of a file, and `+"`broker config defaults`"+` prints the whole file
with its defaults, to start from.

Keys of a section are written nested (`+"`store: {flush: async}`"+`), and
`+"`[]`"+` marks the keys of each entry of a list. A section marked *off* is
off unless the file writes it.

| Key | Type | Default | Description |
|-----|------|---------|-------------|
`)
	for _, k := range ConfigReference() {
		def := k.Default
		switch {
		case def == "":
			def = "—"
		case k.Section && def == "off":
			def = "*off*"
		default:
			def = "`" + def + "`"
		}
		if k.Section && k.Type == "section" && k.Default == "" {
			def = ""
		}
		fmt.Fprintf(ew, "| `%s` | %s | %s | %s |\n", k.Key, k.Type, strings.ReplaceAll(def, "|", `\|`), strings.ReplaceAll(k.Doc, "|", `\|`))
	}
	return ew.err
}

type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) Write(p []byte) (int, error) {
	if e.err != nil {
		return 0, e.err
	}
	n, err := e.w.Write(p)
	e.err = err
	return n, err
}

// CheckFile reads the config file at path as the broker command does and
// returns every problem found: YAML syntax, unknown keys and values of
// the wrong type (each with its line), then the values out of range that
// the components refuse when they start. Nil means the broker would start
// with it as far as the file can tell; addresses in use and missing files
// show only then.
func CheckFile(path string) []error {
	data, err := os.ReadFile(path)
	if err != nil {
		return []error{err}
	}
	// Zero means the default to the components: start, as brokerConfig
	// does, from the defaults the command sets itself.
	d := CommandDefaults()
	c := Config{NamesrvListen: d.NamesrvListen, HTTPListen: d.HTTPListen, GRPCListen: d.GRPCListen, VIPListen: d.VIPListen}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return []error{err}
	}
	if doc.Kind == 0 {
		return unjoin(c.Check())
	}
	if len(doc.Content) == 1 {
		movedKeys(doc.Content[0])
	}
	errs := unjoin(prepare(&doc, reflect.TypeFor[Config](), filepath.Dir(path)))
	// The decoder stops at the first value it cannot read: try each value
	// alone, report the ones that fail, and decode the rest.
	errs = append(errs, dropUndecodable(&doc, reflect.TypeFor[Config]())...)
	if err := doc.Decode(&c); err != nil {
		errs = append(errs, unjoin(err)...)
	}
	return append(errs, unjoin(c.Check())...)
}

// dropUndecodable removes from the prepared tree n, bound for a value of
// type t, each key whose value does not decode into its field, and
// returns why, with the value's line.
func dropUndecodable(n *yaml.Node, t reflect.Type) []error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	var errs []error
	switch {
	case n.Kind == yaml.DocumentNode:
		for _, c := range n.Content {
			errs = append(errs, dropUndecodable(c, t)...)
		}
	case n.Kind == yaml.SequenceNode && t.Kind() == reflect.Slice && !isScalar(t):
		for _, c := range n.Content {
			errs = append(errs, dropUndecodable(c, t.Elem())...)
		}
	case n.Kind == yaml.MappingNode && t.Kind() == reflect.Struct && !isScalar(t):
		fields := map[string]reflect.StructField{}
		yamlFields(t, fields)
		var kept []*yaml.Node
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			f, ok := fields[k.Value]
			if !ok {
				continue // prepare reported it
			}
			ft := f.Type
			for ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if (ft.Kind() == reflect.Struct || ft.Kind() == reflect.Slice && ft.Elem().Kind() == reflect.Struct) && !isScalar(ft) {
				errs = append(errs, dropUndecodable(v, ft)...)
			} else if err := v.Decode(reflect.New(f.Type).Interface()); err != nil {
				errs = append(errs, fmt.Errorf("line %d: %s: %s", v.Line, k.Value, strings.TrimPrefix(strings.TrimSpace(strings.TrimPrefix(err.Error(), "yaml: unmarshal errors:")), fmt.Sprintf("line %d: ", v.Line))))
				continue
			}
			kept = append(kept, k, v)
		}
		n.Content = kept
	}
	return errs
}

// Check returns every value of c out of range, as the components report
// them when they start.
func (c Config) Check() error {
	c.Logger = slog.New(slog.DiscardHandler)
	c = c.withDefaults()
	var errs []error
	so := c.Store
	so.Dir = c.DataDir
	errs = append(errs, so.Check())
	errs = append(errs, c.Broker.Check())
	if _, err := NewLogger(io.Discard, c.LogFormat, c.LogLevel); err != nil {
		errs = append(errs, err)
	}
	if _, err := tlsMode(c.TLS.Mode); err != nil {
		errs = append(errs, err)
	}
	if c.GRPC.LongPolling > grpcserver.DefaultLongPolling {
		errs = append(errs, fmt.Errorf("grpc: longPolling %v is above %v, which clients accept", c.GRPC.LongPolling, grpcserver.DefaultLongPolling))
	}
	if c.ACL.Enabled {
		errs = append(errs, c.ACL.Validate())
	}
	errs = append(errs, c.checkExposure())
	if c.Cluster != nil {
		errs = append(errs, c.clusterRefusals())
	}
	return errors.Join(errs...)
}

// unjoin splits joined errors (errors.Join, nested) into their leaves.
func unjoin(err error) []error {
	if err == nil {
		return nil
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var out []error
		for _, e := range j.Unwrap() {
			out = append(out, unjoin(e)...)
		}
		return out
	}
	return []error{err}
}
