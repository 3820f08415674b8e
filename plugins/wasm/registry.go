package wasm

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"reflect"
	"slices"
	"sync"

	"github.com/tetratelabs/wazero"
)

// RegistryOptions configure a Registry.
type RegistryOptions struct {
	// CacheDir keeps compiled code across restarts for every plugin of the
	// registry (typically under the broker's data directory). Empty keeps
	// it in memory.
	CacheDir string
	// Logger is the default logger of plugins whose Options name none.
	// Default slog.Default().
	Logger *slog.Logger
}

// Registry holds a set of plugins by name and moves the whole set from one
// plugin list to the next: the broker's config file maps onto a []Options,
// and Apply loads it at startup and on every reload.
type Registry struct {
	cache  wazero.CompilationCache
	logger *slog.Logger

	// applyMu serializes Apply and Close.
	applyMu sync.Mutex

	mu struct {
		sync.RWMutex
		plugins map[string]*Plugin
		closed  bool
	}
}

// ApplyReport says what an Apply changed, by plugin name.
type ApplyReport struct {
	Added     []string // loaded for the first time
	Reloaded  []string // module or options changed, or cleared after being disabled
	Removed   []string // no longer listed, or replaced (another kind or expression type)
	Unchanged []string
}

// NewRegistry returns an empty registry.
func NewRegistry(opts RegistryOptions) (*Registry, error) {
	cache, err := openCache(opts.CacheDir)
	if err != nil {
		return nil, err
	}
	r := &Registry{cache: cache, logger: opts.Logger}
	if r.logger == nil {
		r.logger = slog.Default()
	}
	r.mu.plugins = make(map[string]*Plugin)
	return r, nil
}

// Plugin returns the plugin of that name, or nil.
func (r *Registry) Plugin(name string) *Plugin {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.mu.plugins[name]
}

// Filter returns the filter plugin serving an expression type, or nil.
func (r *Registry) Filter(expressionType string) *Plugin {
	r.mu.RLock()
	defer r.mu.RUnlock()
	for _, p := range r.mu.plugins {
		if p.kind == KindFilter && p.exprType == expressionType {
			return p
		}
	}
	return nil
}

// Plugins returns the registry's plugins sorted by name.
func (r *Registry) Plugins() []*Plugin {
	r.mu.RLock()
	defer r.mu.RUnlock()
	names := slices.Sorted(maps.Keys(r.mu.plugins))
	out := make([]*Plugin, len(names))
	for i, n := range names {
		out[i] = r.mu.plugins[n]
	}
	return out
}

// Stats returns every plugin's statistics, sorted by name.
func (r *Registry) Stats() []Stats {
	ps := r.Plugins()
	out := make([]Stats, len(ps))
	for i, p := range ps {
		out[i] = p.Stats()
	}
	return out
}

// change is one plugin's part of an Apply.
type change struct {
	name string
	old  *Plugin     // the plugin being reloaded or replaced
	add  *Plugin     // a new plugin, or nil to reload old
	gen  *generation // the module to publish in add, or else in old
}

// Apply makes specs the registry's plugin list, all or nothing. New plugins
// are loaded, changed ones (module bytes or options) and disabled ones are
// reloaded, unlisted ones are closed; every new module is compiled,
// validated, started and self-tested while the current ones keep serving.
// If any spec fails, nothing changes and the error lists every failure,
// each naming its plugin. Specs' CacheDir is ignored: the registry's cache
// serves them all. Two filters may not serve one expression type. A plugin
// replaced by one of another kind or expression type, or removed, is
// closed, so its Filters fail with ErrClosed.
func (r *Registry) Apply(ctx context.Context, specs []Options) (ApplyReport, error) {
	r.applyMu.Lock()
	defer r.applyMu.Unlock()
	r.mu.RLock()
	closed, current := r.mu.closed, maps.Clone(r.mu.plugins)
	r.mu.RUnlock()
	if closed {
		return ApplyReport{}, fmt.Errorf("%w: registry closed", ErrClosed)
	}

	var (
		report  ApplyReport
		changes []change
		errs    []error
		listed  = make(map[string]bool, len(specs))
		types   = make(map[string]string) // expression type → plugin name
	)
	for _, spec := range specs {
		o := spec.withDefaults()
		o.CacheDir = ""
		if spec.Logger == nil {
			o.Logger = r.logger
		}
		if listed[o.Name] {
			errs = append(errs, &Error{Plugin: o.Name, Op: "apply", Err: wrapf(ErrOptions, "listed twice")})
			continue
		}
		listed[o.Name] = true
		if err := o.validate(); err != nil {
			errs = append(errs, &Error{Plugin: o.Name, Op: "apply", Err: err})
			continue
		}
		if o.Kind == KindFilter {
			if other, dup := types[o.ExpressionType]; dup {
				errs = append(errs, &Error{Plugin: o.Name, Op: "apply", Err: wrapf(ErrOptions,
					"expression type %q is already served by plugin %q", o.ExpressionType, other)})
				continue
			}
			types[o.ExpressionType] = o.Name
		}
		bin, err := readModule(&o)
		if err != nil {
			errs = append(errs, &Error{Plugin: o.Name, Op: "apply", Err: err})
			continue
		}
		old := current[o.Name]
		if old != nil && old.kind == o.Kind && old.exprType == o.ExpressionType {
			g := old.cur.Load()
			if g != nil && g.errDisabled() == nil && sameSpec(g.opts, g.hash, o, moduleHash(bin)) {
				report.Unchanged = append(report.Unchanged, o.Name)
				continue
			}
			gen, err := old.prepareModule(ctx, o, bin, "reload")
			if err != nil {
				errs = append(errs, err)
				continue
			}
			changes = append(changes, change{name: o.Name, old: old, gen: gen})
			continue
		}
		p := &Plugin{name: o.Name, kind: o.Kind, exprType: o.ExpressionType, cache: r.cache}
		gen, err := p.prepareModule(ctx, o, bin, "load")
		if err != nil {
			errs = append(errs, err)
			continue
		}
		changes = append(changes, change{name: o.Name, old: old, add: p, gen: gen})
	}
	if len(errs) > 0 {
		for _, c := range changes {
			c.gen.shutdown()
		}
		return ApplyReport{}, errors.Join(errs...)
	}

	var retire []*Plugin
	r.mu.Lock()
	for _, c := range changes {
		if c.add == nil {
			c.old.reloadMu.Lock()
			c.old.publish(c.gen)
			c.old.reloadMu.Unlock()
			report.Reloaded = append(report.Reloaded, c.name)
			continue
		}
		if c.old != nil {
			retire = append(retire, c.old)
			report.Removed = append(report.Removed, c.name)
		}
		c.add.publish(c.gen)
		r.mu.plugins[c.name] = c.add
		report.Added = append(report.Added, c.name)
	}
	for name, p := range current {
		if !listed[name] {
			delete(r.mu.plugins, name)
			retire = append(retire, p)
			report.Removed = append(report.Removed, name)
		}
	}
	r.mu.Unlock()
	for _, p := range retire {
		_ = p.Close(ctx)
	}
	for _, s := range [][]string{report.Added, report.Reloaded, report.Removed, report.Unchanged} {
		slices.Sort(s)
	}
	return report, nil
}

// sameSpec reports whether two plugin specs load the same thing.
func sameSpec(a Options, aHash string, b Options, bHash string) bool {
	norm := func(o Options) Options {
		o.Module, o.Logger, o.CacheDir = nil, nil, ""
		if len(o.Config) == 0 {
			o.Config = nil
		}
		if len(o.Env) == 0 {
			o.Env = nil
		}
		return o
	}
	return aHash == bHash && reflect.DeepEqual(norm(a), norm(b))
}

// Close closes every plugin, waiting for calls in flight until ctx ends,
// then the compilation cache. Closing twice panics.
func (r *Registry) Close(ctx context.Context) error {
	r.applyMu.Lock()
	defer r.applyMu.Unlock()
	r.mu.Lock()
	if r.mu.closed {
		r.mu.Unlock()
		panic("wasm: registry closed twice")
	}
	r.mu.closed = true
	ps := r.mu.plugins
	r.mu.plugins = map[string]*Plugin{}
	r.mu.Unlock()
	var errs []error
	for _, p := range ps {
		errs = append(errs, p.Close(ctx))
	}
	errs = append(errs, r.cache.Close(context.Background()))
	return errors.Join(errs...)
}
