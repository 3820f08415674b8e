package wasm

import (
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"strings"
	"time"

	"github.com/rmq-go/rmq/sdk/abi"
)

// Kind is the extension point a plugin serves.
type Kind string

// The kinds.
const (
	KindFilter   Kind = "filter"   // a subscription expression type
	KindAllocate Kind = "allocate" // a queue-allocation strategy
	KindTxnCheck Kind = "txncheck" // a transaction-check policy
	// KindTransform changes or refuses messages before they are stored
	// (ABI v1.2).
	KindTransform Kind = "transform"
)

// bit returns the kind's ABI bit and export, or false for an unknown kind.
func (k Kind) bit() (abi.Kinds, string, bool) {
	switch k {
	case KindFilter:
		return abi.KindFilter, abi.ExportFilter, true
	case KindAllocate:
		return abi.KindAllocate, abi.ExportAllocate, true
	case KindTxnCheck:
		return abi.KindTxnCheck, abi.ExportTxnCheck, true
	case KindTransform:
		return abi.KindTransform, abi.ExportTransform, true
	}
	return 0, "", false
}

// Policy is what a filter or a transform does when its plugin fails.
type Policy string

// The failure policies.
const (
	// PolicyHold returns the error: the broker holds the subscription and no
	// offset moves past an unfiltered message. The default.
	PolicyHold Policy = "hold"
	// PolicyOpen counts the error and lets every record of the batch match.
	PolicyOpen Policy = "open"
	// PolicyReject refuses the send whose messages the transform could
	// not transform. The default of transforms.
	PolicyReject Policy = "reject"
	// PolicyPass stores the messages the transform could not transform as
	// they were sent.
	PolicyPass Policy = "pass"
)

// Defaults and bounds of Options.
const (
	DefaultMaxMemoryPages = 256   // 16 MiB
	MaxMemoryPagesLimit   = 32768 // 2 GiB, so guest pointers stay below 2^31
	DefaultDeadline       = 100 * time.Millisecond
	DefaultMaxBinarySize  = 32 << 20 // 32 MiB
	DefaultMaxFailures    = 5
)

// Options describe one plugin. Zero fields take the default their comment
// states. Load copies the struct; the caller may reuse it.
//
// The yaml tags name each field in an entry of the broker's config file
// (plugins); a dotted name such as limits.deadline sits in a nested
// section (limits: {deadline: 1s}). cfg:"not" marks a switch the file
// states the other way round (trusted: false sets Untrusted), cfg:"path" a
// file relative to the config file, cfg:"size" a size with a unit and
// cfg:"json" a value passed as a string's bytes, or else as JSON.
type Options struct {
	// Name names the plugin in errors, logs and stats. Required.
	Name string `yaml:"name"`
	// Kind is the extension point the plugin serves. Required.
	Kind Kind `yaml:"kind"`
	// ExpressionType is, for a filter, the subscription expression type it
	// serves ("CLASS", "GEO", or an override of "TAG" or "SQL92"). Default
	// Name. Other kinds must leave it empty.
	ExpressionType string `yaml:"expressionType"`
	// Path is the module file. Exactly one of Path and Module is set.
	Path string `yaml:"module" cfg:"path"`
	// Module is the module's bytes, instead of Path.
	Module []byte `yaml:"-"`
	// SHA256 is the module's expected sha256 in hex; when set, a module
	// that does not match is refused.
	SHA256 string `yaml:"sha256"`
	// Config is passed to the module's broker_init, once per instance.
	Config []byte `yaml:"config" cfg:"json"`
	// Env is the module's whole environment; the broker's own is never
	// visible to it.
	Env map[string]string `yaml:"env"`
	// FailurePolicy is what a filter does when the plugin fails: PolicyHold
	// (the default) or PolicyOpen; and a transform: PolicyReject (the
	// default) or PolicyPass. Other kinds must leave it empty.
	FailurePolicy Policy `yaml:"failurePolicy"`
	// MaxMemoryPages caps each instance's memory in 64 KiB pages. Default
	// 256 (16 MiB); at most 32768.
	MaxMemoryPages uint32 `yaml:"limits.memoryPages"`
	// Untrusted makes every call run under Deadline; the module's code is
	// compiled with the checks that let a call be interrupted.
	Untrusted bool `yaml:"trusted" cfg:"not"`
	// Deadline bounds each call of an untrusted plugin. Default 100ms.
	// Trusted plugins must leave it zero.
	Deadline time.Duration `yaml:"limits.deadline"`
	// MaxBinarySize caps the module's size in bytes. Default 32 MiB.
	MaxBinarySize int64 `yaml:"limits.maxBinarySize" cfg:"size"`
	// PoolSize caps the instances serving calls at once. Default
	// GOMAXPROCS.
	PoolSize int `yaml:"limits.poolSize"`
	// MaxFailures is how many traps or timeouts in a row disable the plugin
	// until its next reload. Default 5.
	MaxFailures int `yaml:"limits.maxFailures"`
	// RecycleAfter replaces an instance after that many calls, bounding
	// what a leaking plugin can hold. Zero never recycles.
	RecycleAfter int `yaml:"limits.recycleAfter"`
	// CacheDir keeps compiled code across restarts. Empty keeps it in
	// memory only. Plugins loaded through a Registry use the registry's.
	CacheDir string `yaml:"-"`
	// Logger receives the plugin's log lines and the host's reports about
	// it. Default slog.Default().
	Logger *slog.Logger `yaml:"-"`
}

// withDefaults returns a copy of o with its defaults filled in.
func (o Options) withDefaults() Options {
	if o.Kind == KindFilter && o.ExpressionType == "" {
		o.ExpressionType = o.Name
	}
	if o.Kind == KindFilter && o.FailurePolicy == "" {
		o.FailurePolicy = PolicyHold
	}
	if o.Kind == KindTransform && o.FailurePolicy == "" {
		o.FailurePolicy = PolicyReject
	}
	if o.MaxMemoryPages == 0 {
		o.MaxMemoryPages = DefaultMaxMemoryPages
	}
	if o.Untrusted && o.Deadline == 0 {
		o.Deadline = DefaultDeadline
	}
	if o.MaxBinarySize == 0 {
		o.MaxBinarySize = DefaultMaxBinarySize
	}
	if o.PoolSize == 0 {
		o.PoolSize = runtime.GOMAXPROCS(0)
	}
	if o.MaxFailures == 0 {
		o.MaxFailures = DefaultMaxFailures
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	o.SHA256 = strings.ToLower(o.SHA256)
	return o
}

// validate reports every problem of o (after withDefaults) at once.
func (o *Options) validate() error {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: %s", ErrOptions, fmt.Sprintf(format, args...)))
	}
	if o.Name == "" {
		bad("name is empty")
	}
	if _, _, ok := o.Kind.bit(); !ok {
		bad("kind %q is not filter, allocate, txncheck or transform", o.Kind)
	}
	if o.Kind != KindFilter && o.ExpressionType != "" {
		bad("expression type %q is only for filters", o.ExpressionType)
	}
	if (o.Path == "") == (o.Module == nil) {
		bad("exactly one of path and module must be set")
	}
	if o.SHA256 != "" {
		if b, err := hex.DecodeString(o.SHA256); err != nil || len(b) != 32 {
			bad("sha256 %q is not 64 hex digits", o.SHA256)
		}
	}
	if o.Kind == KindFilter && o.FailurePolicy != PolicyHold && o.FailurePolicy != PolicyOpen {
		bad("failure policy %q is not hold or open", o.FailurePolicy)
	}
	if o.Kind == KindTransform && o.FailurePolicy != PolicyReject && o.FailurePolicy != PolicyPass {
		bad("failure policy %q is not reject or pass", o.FailurePolicy)
	}
	if o.Kind != KindFilter && o.Kind != KindTransform && o.FailurePolicy != "" {
		bad("failure policy %q is only for filters and transforms", o.FailurePolicy)
	}
	if o.MaxMemoryPages > MaxMemoryPagesLimit {
		bad("max memory pages %d is above %d", o.MaxMemoryPages, MaxMemoryPagesLimit)
	}
	if o.Deadline < 0 {
		bad("deadline %v is negative", o.Deadline)
	}
	if !o.Untrusted && o.Deadline != 0 {
		bad("a deadline (limits.deadline) bounds untrusted plugins only; set trusted: false")
	}
	if o.MaxBinarySize < 0 {
		bad("max binary size %d is negative", o.MaxBinarySize)
	}
	if o.PoolSize < 0 {
		bad("pool size %d is negative", o.PoolSize)
	}
	if o.MaxFailures < 0 {
		bad("max failures %d is negative", o.MaxFailures)
	}
	if o.RecycleAfter < 0 {
		bad("recycle after %d is negative", o.RecycleAfter)
	}
	for k, v := range o.Env {
		if k == "" || strings.ContainsAny(k, "=\x00") || strings.ContainsRune(v, 0) {
			bad("env entry %q=%q is not a valid variable", k, v)
		}
	}
	return errors.Join(errs...)
}
