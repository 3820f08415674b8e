package natsbridge

import (
	"errors"
	"fmt"
	"log/slog"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/rmq-go/rmq/core/outbox"
)

// Mode says how events are published.
type Mode string

// Publishing modes.
const (
	// ModeJetStream publishes with JetStream and advances the cursor over
	// events the stream acknowledged. The default.
	ModeJetStream Mode = "jetstream"
	// ModeCore publishes plain NATS messages and advances the cursor after
	// a flush round trip to the server: the server received them, but
	// nothing stored them.
	ModeCore Mode = "core"
)

// Defaults for Options fields left zero.
const (
	DefaultSubjectPrefix   = "rmq"
	DefaultStream          = "RMQ_EVENTS"
	DefaultBodyCap         = 256 << 10
	DefaultMaxInFlight     = 512
	DefaultPublishTimeout  = 5 * time.Second
	DefaultCursorInterval  = 200 * time.Millisecond
	DefaultReconnectWait   = time.Second
	DefaultBackoffMin      = 100 * time.Millisecond
	DefaultBackoffMax      = 5 * time.Second
	DefaultStreamMaxAge    = 72 * time.Hour
	DefaultDuplicateWindow = 2 * time.Minute
	DefaultResendKeyTTL    = 24 * time.Hour
	DefaultNotFoundGrace   = 250 * time.Millisecond

	// maxInFlightLimit bounds MaxInFlight: the window is a ring of that
	// many slots.
	maxInFlightLimit = 1 << 16
)

// Options configures a Bridge. Zero values mean the documented default.
// The yaml tags name each field in the broker's config file (section
// natsBridge); cfg:"size" marks sizes written with a unit ("4KiB") and
// cfg:"path" file names relative to the config file's directory.
type Options struct {
	// Source is the outbox the bridge reads and keeps its cursor in.
	// Required.
	Source Source `yaml:"-"`
	// Resender serves resend requests. Required when Resend is set.
	Resender Resender `yaml:"-"`

	// URLs are the NATS servers, e.g. "nats://127.0.0.1:4222". Required.
	URLs []string `yaml:"urls"`
	// Name is the connection's name as the server shows it. Default
	// "rmq-bridge <cluster>/<broker>".
	Name string `yaml:"name"`
	// CredsFile is a user JWT and nkey seed file (.creds).
	CredsFile string `yaml:"credsFile" cfg:"path"`
	// NKeySeedFile is a file holding an nkey seed.
	NKeySeedFile string `yaml:"nkeySeedFile" cfg:"path"`
	// Token is an authentication token.
	Token string `yaml:"token"`
	// User and Password authenticate with a user name and password.
	User     string `yaml:"user"`
	Password string `yaml:"password"`
	// TLS configures TLS to the servers; zero is plain TCP unless a URL
	// says tls://.
	TLS TLSOptions `yaml:"tls"`

	// Mode is ModeJetStream (default) or ModeCore.
	Mode Mode `yaml:"mode"`
	// Stream is the JetStream stream expected to store the events; each
	// publish carries it in the Nats-Expected-Stream header, so a subject
	// captured by another stream (or none) fails instead of going astray.
	// Default "RMQ_EVENTS". JetStream mode only.
	Stream string `yaml:"stream"`
	// Provision creates the stream (or updates it to this config) before
	// the first publish: subjects <prefix>.<cluster>.retry.> and
	// <prefix>.<cluster>.dlq.>, StreamMaxAge, DuplicateWindow, file
	// storage unless StreamMemory. Off by default: the stream is the NATS
	// operator's.
	Provision bool `yaml:"provision"`
	// StreamMaxAge is the provisioned stream's max age. Default 72 h.
	StreamMaxAge time.Duration `yaml:"streamMaxAge"`
	// DuplicateWindow is the provisioned stream's dedupe window. Default
	// 2 min; it must cover the longest time a republish can trail the
	// first publish of the same event (see doc.go).
	DuplicateWindow time.Duration `yaml:"duplicateWindow"`
	// StreamReplicas is the provisioned stream's replica count. Default 1.
	StreamReplicas int `yaml:"streamReplicas"`
	// StreamMemory provisions the stream with memory storage.
	StreamMemory bool `yaml:"streamMemory"`

	// SubjectPrefix is the first token(s) of every subject. Default "rmq".
	SubjectPrefix string `yaml:"subjectPrefix"`
	// Cluster is the cluster name in subjects and message ids. Required
	// (the wiring passes the broker's).
	Cluster string `yaml:"cluster"`
	// Broker is the broker name in message ids. Required (the wiring
	// passes the broker's).
	Broker string `yaml:"broker"`

	// Kinds are the event kinds to publish: outbox.KindRetry and
	// outbox.KindDLQ. Default both.
	Kinds []string `yaml:"kinds"`
	// IncludeGroups and IncludeTopics, when set, publish only events whose
	// group (or topic) matches one of the patterns; ExcludeGroups and
	// ExcludeTopics drop events matching any. Patterns use path.Match
	// syntax ("orders-*", "CID_?"). Events left out still advance the
	// cursor.
	IncludeGroups []string `yaml:"includeGroups"`
	ExcludeGroups []string `yaml:"excludeGroups"`
	IncludeTopics []string `yaml:"includeTopics"`
	ExcludeTopics []string `yaml:"excludeTopics"`
	// Properties are the user properties copied into Rmq-Prop-<name>
	// headers. Default none.
	Properties []string `yaml:"properties"`
	// BodyCap bounds the body published with an event. Default 256 KiB;
	// negative publishes no body.
	BodyCap int `yaml:"bodyCap" cfg:"size"`
	// OmitBody publishes no body (BodyCap -1); it contradicts a BodyCap.
	OmitBody bool `yaml:"omitBody"`

	// MaxInFlight bounds the unacknowledged span of the outbox: events
	// published but not yet acknowledged, and acknowledged ones waiting for
	// an earlier event. Default 512.
	MaxInFlight int `yaml:"maxInFlight"`
	// PublishTimeout bounds the wait for one acknowledgement (or one flush
	// round trip in core mode). Default 5 s.
	PublishTimeout time.Duration `yaml:"publishTimeout"`
	// CursorInterval is how often an advanced cursor is written durably.
	// Default 200 ms.
	CursorInterval time.Duration `yaml:"cursorInterval"`
	// ReconnectWait is the pause between reconnect attempts to the same
	// server. Default 1 s.
	ReconnectWait time.Duration `yaml:"reconnectWait"`
	// BackoffMin and BackoffMax bound the pause after a failed publish
	// before republishing; it doubles per consecutive failure. Defaults
	// 100 ms and 5 s.
	BackoffMin time.Duration `yaml:"backoffMin"`
	BackoffMax time.Duration `yaml:"backoffMax"`

	// Resend serves resend requests on <prefix>.<cluster>.ctl.resend. Off
	// by default; who may send them is a matter of NATS permissions.
	Resend bool `yaml:"resend"`
	// ResendKeyTTL is how long a resend's idempotency key is remembered.
	// Default 24 h.
	ResendKeyTTL time.Duration `yaml:"resendKeyTTL"`
	// NotFoundGrace delays a "no such dead letter" reply to a request that
	// names no broker, so that in a cluster the broker holding the dead
	// letter answers first. Default 250 ms.
	NotFoundGrace time.Duration `yaml:"notFoundGrace"`

	// Logger receives the bridge's logs. Default slog.Default().
	Logger *slog.Logger `yaml:"-"`
	// Now is the clock. Default time.Now.
	Now func() time.Time `yaml:"-"`
}

// TLSOptions configures TLS to the NATS servers.
type TLSOptions struct {
	// Enabled turns TLS on; it is implied by any other field.
	Enabled bool `yaml:"enabled"`
	// CAFile verifies the servers' certificates; default the system pool.
	CAFile string `yaml:"caFile" cfg:"path"`
	// CertFile and KeyFile are a client certificate.
	CertFile string `yaml:"certFile" cfg:"path"`
	KeyFile  string `yaml:"keyFile" cfg:"path"`
	// ServerName overrides the name checked in the server's certificate.
	ServerName string `yaml:"serverName"`
	// InsecureSkipVerify skips verifying the server's certificate (tests).
	InsecureSkipVerify bool `yaml:"insecureSkipVerify"`
}

func (t TLSOptions) on() bool {
	return t.Enabled || t.CAFile != "" || t.CertFile != "" || t.KeyFile != "" || t.ServerName != "" || t.InsecureSkipVerify
}

// withDefaults returns a copy of o with defaults filled in, or every
// problem found.
func (o Options) withDefaults() (Options, error) {
	o.URLs = slices.Clone(o.URLs)
	o.Kinds = slices.Clone(o.Kinds)
	if o.Mode == "" {
		o.Mode = ModeJetStream
	}
	if o.Stream == "" && o.Mode == ModeJetStream {
		o.Stream = DefaultStream
	}
	if o.StreamMaxAge == 0 {
		o.StreamMaxAge = DefaultStreamMaxAge
	}
	if o.DuplicateWindow == 0 {
		o.DuplicateWindow = DefaultDuplicateWindow
	}
	if o.StreamReplicas == 0 {
		o.StreamReplicas = 1
	}
	if o.SubjectPrefix == "" {
		o.SubjectPrefix = DefaultSubjectPrefix
	}
	if len(o.Kinds) == 0 {
		o.Kinds = []string{outbox.KindRetry, outbox.KindDLQ}
	}
	omitAndCap := o.OmitBody && o.BodyCap != 0
	if o.OmitBody {
		o.BodyCap = -1
	}
	if o.BodyCap == 0 {
		o.BodyCap = DefaultBodyCap
	}
	if o.MaxInFlight == 0 {
		o.MaxInFlight = DefaultMaxInFlight
	}
	if o.PublishTimeout == 0 {
		o.PublishTimeout = DefaultPublishTimeout
	}
	if o.CursorInterval == 0 {
		o.CursorInterval = DefaultCursorInterval
	}
	if o.ReconnectWait == 0 {
		o.ReconnectWait = DefaultReconnectWait
	}
	if o.BackoffMin == 0 {
		o.BackoffMin = DefaultBackoffMin
	}
	if o.BackoffMax == 0 {
		o.BackoffMax = DefaultBackoffMax
	}
	if o.ResendKeyTTL == 0 {
		o.ResendKeyTTL = DefaultResendKeyTTL
	}
	if o.NotFoundGrace == 0 {
		o.NotFoundGrace = DefaultNotFoundGrace
	}
	if o.Name == "" {
		o.Name = "rmq-bridge " + o.Cluster + "/" + o.Broker
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	err := o.validate()
	if omitAndCap {
		err = errors.Join(errors.New("natsbridge: omitBody and bodyCap contradict each other"), err)
	}
	return o, err
}

// validate reports every problem with o at once.
func (o *Options) validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf("natsbridge: "+format, args...)) }
	if o.Source == nil {
		bad("Options.Source is required")
	}
	if len(o.URLs) == 0 {
		bad("at least one NATS URL is required")
	}
	for _, u := range o.URLs {
		if strings.TrimSpace(u) == "" || strings.ContainsAny(u, " ,") {
			bad("NATS URL %q: want one URL per entry, e.g. nats://host:4222", u)
		}
	}
	auth := 0
	for _, set := range []bool{o.CredsFile != "", o.NKeySeedFile != "", o.Token != "", o.User != "" || o.Password != ""} {
		if set {
			auth++
		}
	}
	if auth > 1 {
		bad("choose one of credentials file, nkey seed file, token, or user and password")
	}
	if (o.User == "") != (o.Password == "") {
		bad("user and password go together")
	}
	if (o.TLS.CertFile == "") != (o.TLS.KeyFile == "") {
		bad("a TLS client certificate needs both certFile and keyFile")
	}
	switch o.Mode {
	case ModeJetStream:
		if err := checkStreamName(o.Stream); err != nil {
			bad("stream %q: %v", o.Stream, err)
		}
	case ModeCore:
		if o.Stream != "" {
			bad("a stream is expected only in jetstream mode")
		}
		if o.Provision {
			bad("provisioning a stream needs jetstream mode")
		}
	default:
		bad("mode %q: want %q or %q", o.Mode, ModeJetStream, ModeCore)
	}
	if o.Provision {
		if o.StreamMaxAge < 0 || o.DuplicateWindow < 0 {
			bad("stream max age and duplicate window must not be negative")
		} else if o.DuplicateWindow > o.StreamMaxAge {
			bad("duplicate window %v is longer than the stream's max age %v", o.DuplicateWindow, o.StreamMaxAge)
		}
		if o.StreamReplicas < 1 || o.StreamReplicas > 5 {
			bad("stream replicas %d: want 1..5", o.StreamReplicas)
		}
	}
	for _, tok := range strings.Split(o.SubjectPrefix, ".") {
		if tok == "" || !tokenSafe(tok) {
			bad("subject prefix %q: want dot-separated tokens of A-Z a-z 0-9 _ -", o.SubjectPrefix)
			break
		}
	}
	if o.Cluster == "" {
		bad("a cluster name is required")
	}
	if o.Broker == "" {
		bad("a broker name is required")
	}
	for _, k := range o.Kinds {
		if k != outbox.KindRetry && k != outbox.KindDLQ {
			bad("event kind %q: want %q or %q", k, outbox.KindRetry, outbox.KindDLQ)
		}
	}
	for name, pats := range map[string][]string{
		"includeGroups": o.IncludeGroups, "excludeGroups": o.ExcludeGroups,
		"includeTopics": o.IncludeTopics, "excludeTopics": o.ExcludeTopics,
	} {
		for _, p := range pats {
			if _, err := path.Match(p, ""); err != nil || p == "" {
				bad("%s pattern %q is malformed", name, p)
			}
		}
	}
	for _, p := range o.Properties {
		if p == "" || strings.ContainsFunc(p, func(r rune) bool { return r <= ' ' || r >= 0x7f || r == ':' }) {
			bad("property %q cannot be a header name: want printable ASCII without spaces or colons", p)
		}
	}
	if o.MaxInFlight < 1 || o.MaxInFlight > maxInFlightLimit {
		bad("max in flight %d: want 1..%d", o.MaxInFlight, maxInFlightLimit)
	}
	for name, d := range map[string]time.Duration{
		"publish timeout": o.PublishTimeout, "cursor interval": o.CursorInterval, "reconnect wait": o.ReconnectWait,
		"backoff min": o.BackoffMin, "backoff max": o.BackoffMax, "resend key TTL": o.ResendKeyTTL, "not-found grace": o.NotFoundGrace,
	} {
		if d < 0 {
			bad("%s %v must not be negative", name, d)
		}
	}
	if o.BackoffMax < o.BackoffMin {
		bad("backoff max %v is below backoff min %v", o.BackoffMax, o.BackoffMin)
	}
	if o.Resend && o.Resender == nil {
		bad("serving resends needs Options.Resender")
	}
	slices.SortFunc(errs, func(a, b error) int { return strings.Compare(a.Error(), b.Error()) })
	return errors.Join(errs...)
}

// checkStreamName applies JetStream's rules for stream names.
func checkStreamName(s string) error {
	if s == "" {
		return errors.New("empty")
	}
	if strings.ContainsAny(s, " \t\r\n.*>/\\") {
		return errors.New("stream names cannot contain whitespace, '.', '*', '>' or path separators")
	}
	return nil
}
