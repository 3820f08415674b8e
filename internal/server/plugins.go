package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rmq-go/rmq/core/broker"
	"github.com/rmq-go/rmq/plugins/wasm"
)

// Plugin is one entry of the broker's plugin list: a WASM plugin and, for
// allocation strategies and transaction-check policies, the groups it
// serves.
//
// A filter plugin serves its ExpressionType (upper-cased; default its
// upper-cased Name), which may be a new type such as CLASS or one of the
// built-in TAG and SQL92, which it then replaces.
type Plugin struct {
	wasm.Options `yaml:",inline"`
	// Groups are, for an allocate plugin, the consumer groups whose queues
	// it assigns and, for a txncheck plugin, the producer groups whose half
	// messages it decides. Empty makes the plugin the default of its kind
	// for every group no other plugin names. Filters and transforms leave
	// it empty.
	Groups []string `yaml:"groups"`
	// Topics are, for a transform, the topics whose sends it sees: names
	// or patterns with * and ? ("Audit*"). Required for transforms; other
	// kinds leave it empty. Several transforms matching a topic run in the
	// order of the list.
	Topics []string `yaml:"topics"`
}

// pluginSet is one applied plugin list with its lookups. It is immutable;
// an apply publishes a new one.
type pluginSet struct {
	specs      []Plugin
	byName     map[string]*Plugin
	filters    map[string]*wasm.Plugin // expression type →
	allocate   map[string]*wasm.Plugin // consumer group →; "" is the default
	txn        map[string]*wasm.Plugin // producer group →; "" is the default
	transforms []transformEntry        // in the order of the list
}

// byGroup returns the plugin serving group in m: the group's own, else the
// default, else nil.
func byGroup(m map[string]*wasm.Plugin, group string) *wasm.Plugin {
	if p, ok := m[group]; ok {
		return p
	}
	return m[""]
}

// pluginHost owns the broker's plugins: the registry, the applied list, the
// filter factories it gives the broker and the admin commands.
type pluginHost struct {
	reg        *wasm.Registry
	source     func() ([]Plugin, error)
	reloadACL  func() error // Server.ReloadACL and ReloadTLS, set before attach
	log        *slog.Logger
	brokerName string

	// applyMu serializes applies, so the registry, the set and the broker's
	// filter factories move together.
	applyMu sync.Mutex
	b       *broker.Broker // set once by attach, before the broker serves
	set     atomic.Pointer[pluginSet]
}

// loadPlugins opens the plugin registry and loads Config.Plugins, all or
// nothing.
func (s *Server) loadPlugins() error {
	dir := s.cfg.PluginCacheDir
	if dir == "" {
		dir = filepath.Join(s.cfg.DataDir, "plugin-cache")
	}
	name := s.cfg.Broker.BrokerName
	if name == "" {
		name = broker.DefaultBrokerName
	}
	h, err := newPluginHost(dir, name, s.cfg.PluginSource, s.log.With("component", "plugins"))
	if err != nil {
		return err
	}
	start := time.Now()
	if _, err := h.apply(context.Background(), s.cfg.Plugins, true); err != nil {
		h.close(context.Background())
		return fmt.Errorf("plugins: %w", err)
	}
	if len(s.cfg.Plugins) > 0 {
		h.log.Info("plugins loaded", "count", len(s.cfg.Plugins), "took", time.Since(start).Round(time.Millisecond))
	}
	s.plugins = h
	return nil
}

func newPluginHost(cacheDir, brokerName string, source func() ([]Plugin, error), log *slog.Logger) (*pluginHost, error) {
	reg, err := wasm.NewRegistry(wasm.RegistryOptions{CacheDir: cacheDir, Logger: log})
	if err != nil {
		return nil, fmt.Errorf("plugins: %w", err)
	}
	h := &pluginHost{reg: reg, source: source, log: log, brokerName: brokerName}
	h.set.Store(&pluginSet{})
	return h, nil
}

// normalize checks what the registry cannot (groups, the expression types'
// case) and returns the specs with their expression types upper-cased, as
// the broker looks them up.
func normalize(specs []Plugin) ([]Plugin, error) {
	out := make([]Plugin, len(specs))
	var errs []error
	bad := func(name, format string, args ...any) {
		errs = append(errs, &wasm.Error{Plugin: name, Op: "config", Err: fmt.Errorf("%w: %s", wasm.ErrOptions, fmt.Sprintf(format, args...))})
	}
	type owner struct {
		kind  wasm.Kind
		group string
	}
	owners := map[owner]string{}
	for i, sp := range specs {
		sp.Groups = slices.Clone(sp.Groups)
		slices.Sort(sp.Groups)
		sp.Topics = slices.Clone(sp.Topics)
		if sp.Kind == wasm.KindTransform {
			if len(sp.Topics) == 0 {
				bad(sp.Name, "a transform names the topics it sees (topics: [Orders, \"Audit*\"])")
			}
			for _, t := range sp.Topics {
				if _, err := path.Match(t, ""); err != nil || t == "" {
					bad(sp.Name, "topic pattern %q is not a name or a pattern of * and ?", t)
				}
			}
			if len(sp.Groups) > 0 {
				bad(sp.Name, "groups are for allocate and txncheck plugins; a transform names topics")
			}
		} else if len(sp.Topics) > 0 {
			bad(sp.Name, "topics are for transform plugins")
		}
		switch sp.Kind {
		case wasm.KindFilter:
			if sp.ExpressionType == "" {
				sp.ExpressionType = sp.Name
			}
			sp.ExpressionType = strings.ToUpper(sp.ExpressionType)
			if len(sp.Groups) > 0 {
				bad(sp.Name, "groups are for allocate and txncheck plugins; a filter serves an expression type")
			}
		case wasm.KindAllocate, wasm.KindTxnCheck:
			groups := sp.Groups
			if len(groups) == 0 {
				groups = []string{""}
			}
			for _, g := range groups {
				if g == "" && len(sp.Groups) > 0 {
					bad(sp.Name, "a group name is empty")
					continue
				}
				if other, dup := owners[owner{sp.Kind, g}]; dup {
					if g == "" {
						bad(sp.Name, "plugin %q is already the default %s plugin (name groups to split them)", other, sp.Kind)
					} else {
						bad(sp.Name, "group %q is already served by %s plugin %q", g, sp.Kind, other)
					}
					continue
				}
				owners[owner{sp.Kind, g}] = sp.Name
			}
		}
		out[i] = sp
	}
	return out, errors.Join(errs...)
}

// overrides returns the built-in expression types that plugins in filters
// replace.
func overrides(filters map[string]*wasm.Plugin) []string {
	var out []string
	for _, t := range []string{broker.ExpressionTag, broker.ExpressionSQL92} {
		if filters[t] != nil {
			out = append(out, t)
		}
	}
	return out
}

// apply makes specs the plugin list: all or nothing. initial is the load
// at startup, before the broker exists.
func (h *pluginHost) apply(ctx context.Context, specs []Plugin, initial bool) (wasm.ApplyReport, error) {
	h.applyMu.Lock()
	defer h.applyMu.Unlock()
	specs, err := normalize(specs)
	if err != nil {
		return wasm.ApplyReport{}, err
	}
	old := h.set.Load()
	if !initial {
		// A subscription holds the Filter it compiled. A built-in type's
		// filters are native and cannot start or stop consulting a plugin,
		// so replacing TAG or SQL92 is decided at startup.
		var want []string
		for _, sp := range specs {
			if sp.Kind == wasm.KindFilter && (sp.ExpressionType == broker.ExpressionTag || sp.ExpressionType == broker.ExpressionSQL92) {
				want = append(want, sp.ExpressionType)
				if old.filters[sp.ExpressionType] == nil {
					return wasm.ApplyReport{}, &wasm.Error{Plugin: sp.Name, Op: "reload", Err: fmt.Errorf("%w: replacing the built-in expression type %s takes a restart", wasm.ErrOptions, sp.ExpressionType)}
				}
			}
		}
		for _, t := range overrides(old.filters) {
			if !slices.Contains(want, t) {
				return wasm.ApplyReport{}, &wasm.Error{Plugin: old.filters[t].Name(), Op: "reload", Err: fmt.Errorf("%w: restoring the built-in expression type %s takes a restart", wasm.ErrOptions, t)}
			}
		}
	}
	opts := make([]wasm.Options, len(specs))
	for i := range specs {
		opts[i] = specs[i].Options
	}
	report, err := h.reg.Apply(ctx, opts)
	if err != nil {
		return wasm.ApplyReport{}, err
	}
	set := &pluginSet{
		specs:    specs,
		byName:   make(map[string]*Plugin, len(specs)),
		filters:  map[string]*wasm.Plugin{},
		allocate: map[string]*wasm.Plugin{},
		txn:      map[string]*wasm.Plugin{},
	}
	for i := range specs {
		sp := &set.specs[i]
		set.byName[sp.Name] = sp
		p := h.reg.Plugin(sp.Name)
		groups := sp.Groups
		if len(groups) == 0 {
			groups = []string{""}
		}
		switch sp.Kind {
		case wasm.KindFilter:
			set.filters[sp.ExpressionType] = p
		case wasm.KindAllocate:
			for _, g := range groups {
				set.allocate[g] = p
			}
		case wasm.KindTxnCheck:
			for _, g := range groups {
				set.txn[g] = p
			}
		case wasm.KindTransform:
			set.transforms = append(set.transforms, transformEntry{name: sp.Name, topics: sp.Topics, p: p})
		}
	}
	h.set.Store(set)
	if h.b != nil {
		h.refreshFactoriesLocked(old, set, report)
	}
	return report, nil
}

// refreshFactoriesLocked gives the broker a factory for every expression
// type a changed plugin serves now and removes the types no plugin serves
// any more; either way the type's cached filters are dropped, so new
// subscriptions are checked against the module serving now. Filters held
// by subscriptions follow the change by themselves (pluginFilter).
func (h *pluginHost) refreshFactoriesLocked(old, cur *pluginSet, report wasm.ApplyReport) {
	types := map[string]bool{}
	for _, name := range slices.Concat(report.Added, report.Reloaded, report.Removed) {
		for _, s := range []*pluginSet{old, cur} {
			if sp := s.byName[name]; sp != nil && sp.Kind == wasm.KindFilter {
				types[sp.ExpressionType] = true
			}
		}
	}
	for _, typ := range slices.Sorted(maps.Keys(types)) {
		if cur.filters[typ] != nil {
			h.b.Hooks().SetFilterFactory(typ, h.factory(typ))
		} else {
			h.b.Hooks().SetFilterFactory(typ, nil)
		}
	}
}

// attach registers the admin commands with b and lets later applies
// update its filter factories. It is called before b serves.
func (h *pluginHost) attach(b *broker.Broker) {
	h.applyMu.Lock()
	h.b = b
	h.applyMu.Unlock()
	b.Admin().Handle("plugins.list", func(context.Context, json.RawMessage) (any, error) { return h.list(), nil })
	b.Admin().Handle("plugins.reload", func(ctx context.Context, _ json.RawMessage) (any, error) {
		// The ACL and the TLS files are re-read with the plugins; each
		// keeps its running version when its new one is refused.
		var aclErr error
		if h.reloadACL != nil {
			aclErr = h.reloadACL()
		}
		r, err := h.reload(ctx)
		if err = errors.Join(aclErr, err); err != nil {
			return nil, err
		}
		return ReloadResult{Added: r.Added, Reloaded: r.Reloaded, Removed: r.Removed, Unchanged: r.Unchanged}, nil
	})
	b.Admin().Handle("allocate", h.handleAllocate)
}

// filterFactories returns base with a factory added for every expression
// type the current filter plugins serve.
func (h *pluginHost) filterFactories(base map[string]broker.FilterFactory) map[string]broker.FilterFactory {
	out := maps.Clone(base)
	if out == nil {
		out = map[string]broker.FilterFactory{}
	}
	for typ := range h.set.Load().filters {
		out[typ] = h.factory(typ)
	}
	return out
}

// reload re-reads the plugin list and applies it.
func (h *pluginHost) reload(ctx context.Context) (wasm.ApplyReport, error) {
	var specs []Plugin
	if h.source != nil {
		var err error
		if specs, err = h.source(); err != nil {
			h.log.Error("plugin reload refused", "err", err)
			return wasm.ApplyReport{}, err
		}
	} else {
		specs = h.set.Load().specs
	}
	r, err := h.apply(ctx, specs, false)
	if err != nil {
		h.log.Error("plugin reload refused; the previous plugins keep serving", "err", err)
		return r, err
	}
	h.log.Info("plugins reloaded", "added", r.Added, "reloaded", r.Reloaded, "removed", r.Removed, "unchanged", r.Unchanged)
	return r, nil
}

func (h *pluginHost) close(ctx context.Context) error {
	return h.reg.Close(ctx)
}

// ReloadResult is the answer of the plugins.reload admin command: the
// plugins' names by what the reload did to them.
type ReloadResult struct {
	Added     []string `json:"added"`
	Reloaded  []string `json:"reloaded"`
	Removed   []string `json:"removed"`
	Unchanged []string `json:"unchanged"`
}

// PluginStatus is one plugin in the answer of the plugins.list admin
// command.
type PluginStatus struct {
	Name           string   `json:"name"`
	Kind           string   `json:"kind"`
	ExpressionType string   `json:"expressionType,omitempty"` // filters
	Groups         []string `json:"groups,omitempty"`         // allocate, txncheck; none: the default
	Topics         []string `json:"topics,omitempty"`         // transforms
	FailurePolicy  string   `json:"failurePolicy,omitempty"`  // filters, transforms
	Module         string   `json:"module"`                   // the module's path
	Trusted        bool     `json:"trusted"`
	Version        string   `json:"version"`    // the plugin's own label
	SHA256         string   `json:"sha256"`     // of the serving module
	Generation     int      `json:"generation"` // 1 at load, plus one per reload
	Instances      int      `json:"instances"`
	Calls          uint64   `json:"calls"`
	Records        uint64   `json:"records"`
	Errors         uint64   `json:"errors"`
	Traps          uint64   `json:"traps"`
	Timeouts       uint64   `json:"timeouts"`
	Rejected       uint64   `json:"rejected"` // messages a transform refused
	P99Nanos       int64    `json:"p99Nanos"` // of one call
	Disabled       bool     `json:"disabled"`
	LastError      string   `json:"lastError,omitempty"`
}

// list returns the plugins' status, sorted by name.
func (h *pluginHost) list() []PluginStatus {
	set := h.set.Load()
	out := []PluginStatus{}
	for _, st := range h.reg.Stats() {
		ps := PluginStatus{
			Name: st.Name, Kind: string(st.Kind), Version: st.Version, SHA256: st.SHA256,
			Generation: st.Generation, Instances: st.Instances, Calls: st.Calls, Records: st.Records,
			Errors: st.Errors, Traps: st.Traps, Timeouts: st.Timeouts, Rejected: st.Rejected, P99Nanos: int64(st.P99),
			Disabled: st.Disabled, LastError: st.LastError,
		}
		if sp := set.byName[st.Name]; sp != nil {
			ps.ExpressionType, ps.Groups, ps.Module, ps.Trusted = sp.ExpressionType, sp.Groups, sp.Path, !sp.Untrusted
			ps.Topics, ps.FailurePolicy = sp.Topics, string(sp.FailurePolicy)
			if ps.FailurePolicy == "" && sp.Kind == wasm.KindTransform {
				ps.FailurePolicy = string(wasm.PolicyReject)
			} else if ps.FailurePolicy == "" && sp.Kind == wasm.KindFilter {
				ps.FailurePolicy = string(wasm.PolicyHold)
			}
			if sp.Path == "" {
				ps.Module = "(bytes)"
			}
		}
		out = append(out, ps)
	}
	return out
}

// Hooks for the other components. The plugins are loaded before
// broker.New, so Start may hand these to the broker's Options.

// ReloadPlugins re-reads the plugin list (Config.PluginSource) and applies
// it: all or nothing, the current plugins serving until the new ones have
// passed their checks. SIGHUP and the plugins.reload admin command call it.
func (s *Server) ReloadPlugins(ctx context.Context) (wasm.ApplyReport, error) {
	return s.plugins.reload(ctx)
}

// PluginRegistry returns the registry holding the broker's plugins.
func (s *Server) PluginRegistry() *wasm.Registry { return s.plugins.reg }

// Allocator returns the broker's queue-allocation strategy for in-process
// callers: for each call, the strategy Broker.Assign would choose for the
// call's group at that moment (its plugin, its configured strategy, the
// default plugin, else AVG).
func (s *Server) Allocator() broker.Allocator { return s.Broker }

// TxnPlugin returns the txncheck plugin configured for a producer group at
// this moment (the group's own, else the default), or nil for the
// built-in policy. Call it per decision rather than keeping the result: a
// reload may replace the plugin.
func (s *Server) TxnPlugin(producerGroup string) *wasm.Plugin {
	return byGroup(s.plugins.set.Load().txn, producerGroup)
}
