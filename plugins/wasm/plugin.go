package wasm

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tetratelabs/wazero"
)

// Plugin is one loaded plugin: a module serving one kind, with its pool of
// instances. It is safe for concurrent use; Reload swaps the module under
// running calls.
type Plugin struct {
	name     string
	kind     Kind
	exprType string
	cache    wazero.CompilationCache
	owned    bool // the plugin closes cache
	cur      atomic.Pointer[generation]
	stats    counters
	closed   atomic.Bool
	// policy is the failure policy of the last generation published,
	// kept after Close: a call that finds the plugin closed (removed by a
	// reload while a send was on its way to it) fails as the plugin's
	// policy says.
	policy atomic.Pointer[Policy]

	// reloadMu serializes Reload and Close and guards seq.
	reloadMu sync.Mutex
	seq      int // of the last generation published

	mu struct {
		sync.Mutex
		lastErr string // for Stats
	}
}

// Load compiles, validates and starts a plugin. It returns once one instance
// has passed init and the module's self-tests. Errors name the plugin.
func Load(ctx context.Context, opts Options) (*Plugin, error) {
	o := opts.withDefaults()
	if err := o.validate(); err != nil {
		return nil, &Error{Plugin: o.Name, Op: "load", Err: err}
	}
	cache, err := openCache(o.CacheDir)
	if err != nil {
		return nil, &Error{Plugin: o.Name, Op: "load", Err: err}
	}
	p, err := load(ctx, o, cache)
	if err != nil {
		_ = cache.Close(ctx)
		return nil, err
	}
	p.owned = true
	return p, nil
}

// openCache opens the compilation cache under dir, or an in-memory one.
func openCache(dir string) (wazero.CompilationCache, error) {
	if dir == "" {
		return wazero.NewCompilationCache(), nil
	}
	c, err := wazero.NewCompilationCacheWithDir(dir)
	if err != nil {
		return nil, wrapf(ErrOptions, "cache dir: %v", err)
	}
	return c, nil
}

// load builds a plugin on a cache it does not own. o has its defaults and
// is valid.
func load(ctx context.Context, o Options, cache wazero.CompilationCache) (*Plugin, error) {
	p := &Plugin{name: o.Name, kind: o.Kind, exprType: o.ExpressionType, cache: cache}
	g, err := p.prepare(ctx, o, "load")
	if err != nil {
		return nil, err
	}
	p.publish(g)
	return p, nil
}

// prepare reads and builds a generation, wrapping errors for op.
func (p *Plugin) prepare(ctx context.Context, o Options, op string) (*generation, error) {
	bin, err := readModule(&o)
	if err != nil {
		return nil, p.wrap(op, err)
	}
	return p.prepareModule(ctx, o, bin, op)
}

// prepareModule builds a generation from the module's bytes.
func (p *Plugin) prepareModule(ctx context.Context, o Options, bin []byte, op string) (*generation, error) {
	g, err := newGeneration(ctx, p, o, bin)
	if err != nil {
		return nil, p.wrap(op, err)
	}
	return g, nil
}

// Name returns the plugin's name.
func (p *Plugin) Name() string { return p.name }

// Kind returns the plugin's kind.
func (p *Plugin) Kind() Kind { return p.kind }

// ExpressionType returns the subscription expression type a filter plugin
// serves, or "" for other kinds.
func (p *Plugin) ExpressionType() string { return p.exprType }

// Reload replaces the plugin's module or options. The new module is
// compiled, validated, started and self-tested while the current one keeps
// serving; on success it is swapped in atomically and calls in flight finish
// on the old instances, which close after them. On failure the current
// module keeps serving and the error says why. Reload also clears a
// disabled plugin. Name, Kind and ExpressionType cannot change.
func (p *Plugin) Reload(ctx context.Context, opts Options) error {
	o := opts.withDefaults()
	if err := o.validate(); err != nil {
		return &Error{Plugin: p.name, Op: "reload", Err: err}
	}
	if o.Name != p.name || o.Kind != p.kind || o.ExpressionType != p.exprType {
		return &Error{Plugin: p.name, Op: "reload", Err: wrapf(ErrOptions,
			"reload cannot change name, kind or expression type (%q, %s, %q) to (%q, %s, %q)",
			p.name, p.kind, p.exprType, o.Name, o.Kind, o.ExpressionType)}
	}
	p.reloadMu.Lock()
	defer p.reloadMu.Unlock()
	old := p.cur.Load()
	if old == nil {
		return &Error{Plugin: p.name, Op: "reload", Err: ErrClosed}
	}
	g, err := p.prepare(ctx, o, "reload")
	if err != nil {
		p.noteError(err)
		return err
	}
	p.publish(g)
	return nil
}

// publish numbers g, makes it current and retires the generation it
// replaces. The caller holds reloadMu, or owns p alone.
func (p *Plugin) publish(g *generation) {
	p.seq++
	g.seq = p.seq
	pol := g.opts.FailurePolicy
	p.policy.Store(&pol)
	if old := p.cur.Swap(g); old != nil {
		old.retire()
	}
	g.opts.Logger.Info("wasm plugin serving", "plugin", p.name, "kind", p.kind,
		"generation", g.seq, "sha256", g.hash, "version", g.info.PluginVersion)
}

// Close stops the plugin: new calls fail with ErrClosed, and Close waits
// for calls in flight until ctx ends. Closing twice panics.
func (p *Plugin) Close(ctx context.Context) error {
	if !p.closed.CompareAndSwap(false, true) {
		panic(fmt.Sprintf("wasm: plugin %q closed twice", p.name))
	}
	p.reloadMu.Lock()
	g := p.cur.Swap(nil)
	p.reloadMu.Unlock()
	var err error
	if g != nil {
		g.retire()
		select {
		case <-g.done:
		case <-ctx.Done():
			err = ctx.Err()
		}
	}
	if p.owned {
		// Compiled code of a generation still draining stays valid: wazero
		// counts references to it.
		_ = p.cache.Close(context.Background())
	}
	return err
}

// acquire returns the current generation with a call counted in flight.
func (p *Plugin) acquire() (*generation, error) {
	for {
		g := p.cur.Load()
		if g == nil {
			return nil, ErrClosed
		}
		g.refs.Add(1)
		if p.cur.Load() == g {
			return g, nil
		}
		g.release()
	}
}

// wrap makes err an *Error of op, keeping a trapped instance's stderr.
func (p *Plugin) wrap(op string, err error) error {
	var e *Error
	if errors.As(err, &e) {
		return err
	}
	e = &Error{Plugin: p.name, Op: op, Err: err}
	if ce, ok := err.(*callError); ok {
		e.Err = ce.err
	}
	var ce *callError
	if errors.As(err, &ce) {
		e.Stderr = ce.stderr
	}
	return e
}

// noteError remembers err for Stats.
func (p *Plugin) noteError(err error) {
	p.mu.Lock()
	p.mu.lastErr = err.Error()
	p.mu.Unlock()
}

// run takes an instance of the current generation, runs fn on it and
// accounts for the call. fn returns the records it passed.
func (p *Plugin) run(ctx context.Context, op string, fn func(g *generation, inst *instance) (int, error)) error {
	g, err := p.acquire()
	if err != nil {
		return &Error{Plugin: p.name, Op: op, Err: err}
	}
	defer g.release()
	inst, err := g.get(ctx)
	if err != nil {
		err = p.wrap(op, err)
		p.stats.errors.Add(1)
		p.noteError(err)
		return err
	}
	start, calls := time.Now(), inst.calls
	n, err := fn(g, inst)
	p.stats.latency.record(time.Since(start))
	p.stats.calls.Add(uint64(inst.calls - calls))
	p.stats.records.Add(uint64(n))
	g.put(inst, err)
	if err != nil {
		p.stats.errors.Add(1)
		var ce *callError
		poisoned := errors.As(err, &ce)
		if poisoned {
			if ce.timeout {
				p.stats.timeouts.Add(1)
			} else {
				p.stats.traps.Add(1)
			}
		}
		err = p.wrap(op, err)
		p.noteError(err)
		// Traps and timeouts are rare and bounded by the backoff; the
		// plugin's own errors may come with every batch.
		level := slog.LevelDebug
		if poisoned {
			level = slog.LevelWarn
		}
		g.opts.Logger.Log(ctx, level, "wasm plugin call failed", "plugin", p.name, "op", op, "err", err)
		return err
	}
	return nil
}

// Stats returns the plugin's statistics.
func (p *Plugin) Stats() Stats {
	s := Stats{
		Name:     p.name,
		Kind:     p.kind,
		Calls:    p.stats.calls.Load(),
		Records:  p.stats.records.Load(),
		Errors:   p.stats.errors.Load(),
		Traps:    p.stats.traps.Load(),
		Timeouts: p.stats.timeouts.Load(),
		Rejected: p.stats.rejected.Load(),
		P99:      p.stats.latency.quantile(0.99),
	}
	p.mu.Lock()
	s.LastError = p.mu.lastErr
	p.mu.Unlock()
	if g := p.cur.Load(); g != nil {
		s.Version = g.info.PluginVersion
		s.SHA256 = g.hash
		s.ABI, s.ABIMinor = int(g.info.Version), int(g.info.Minor)
		s.Generation = g.seq
		s.SelfTests = g.tests
		s.Disabled = g.errDisabled() != nil
		g.mu.Lock()
		s.Instances = g.mu.live
		g.mu.Unlock()
	}
	return s
}
