package wasm

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"
	"github.com/tetratelabs/wazero/sys"

	"github.com/rmq-go/rmq/sdk/abi"
)

// Timings of instance management.
const (
	// initDeadline bounds starting an untrusted instance (the Go runtime's
	// init, the plugin's init functions and broker_init).
	initDeadline = 10 * time.Second
	// backoffBase and backoffMax bound the wait before re-creating an
	// instance after consecutive failures.
	backoffBase = 10 * time.Millisecond
	backoffMax  = time.Second
	// maxLogLen bounds one log line from a plugin.
	maxLogLen = 4 << 10
)

// generation is one loaded module of a plugin: its runtime, compiled code
// and pool of instances. A reload builds a new generation and swaps it in;
// the old one closes when its last call returns.
type generation struct {
	opts  Options // with defaults
	seq   int     // 1 for the first module served, set when published
	hash  string  // sha256 of the module, hex
	info  abi.Info
	shape moduleShape
	tests int // self-test vectors of the plugin's kind the canary passed
	// instrumented is set for an untrusted module whose code counts down
	// to interruptCheck (interrupt.go); an untrusted module the rewriter
	// cannot handle runs with wazero's checks instead.
	instrumented bool
	rt           wazero.Runtime
	compiled     wazero.CompiledModule
	modCfg       wazero.ModuleConfig

	sem chan struct{} // one token per instance serving a call

	mu struct {
		sync.Mutex
		idle       []*instance
		live       int
		nextCreate time.Time // no new instance before, after a failure
	}
	failures atomic.Int32          // traps and timeouts in a row
	disabled atomic.Pointer[error] // set after MaxFailures failures in a row

	refs      atomic.Int64 // calls in flight
	retired   atomic.Bool  // no longer current: close when refs reaches 0
	closeOnce sync.Once
	done      chan struct{} // closed when the generation is closed
}

// readModule returns the module's bytes, enforcing the size limit before
// reading a file.
func readModule(o *Options) ([]byte, error) {
	if o.Module != nil {
		if int64(len(o.Module)) > o.MaxBinarySize {
			return nil, wrapf(ErrModule, "module is %d bytes, more than the %d allowed", len(o.Module), o.MaxBinarySize)
		}
		return o.Module, nil
	}
	f, err := os.Open(o.Path)
	if err != nil {
		return nil, wrapf(ErrModule, "%v", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, o.MaxBinarySize+1))
	if err != nil {
		return nil, wrapf(ErrModule, "%v", err)
	}
	if int64(len(b)) > o.MaxBinarySize {
		return nil, wrapf(ErrModule, "%s is larger than the %d bytes allowed", o.Path, o.MaxBinarySize)
	}
	return b, nil
}

// moduleHash returns the hex sha256 of b.
func moduleHash(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// newGeneration compiles, validates and canaries a module: on success it has
// one initialized instance in its pool and is ready to serve.
func newGeneration(ctx context.Context, p *Plugin, opts Options, bin []byte) (_ *generation, err error) {
	g := &generation{opts: opts, hash: moduleHash(bin), done: make(chan struct{})}
	if opts.SHA256 != "" && opts.SHA256 != g.hash {
		return nil, wrapf(ErrHash, "module has sha256 %s, config expects %s", g.hash, opts.SHA256)
	}
	if bin, err = checkLimits(bin); err != nil {
		return nil, err
	}
	if opts.Untrusted {
		ib, err := instrument(bin)
		if err == nil {
			// The rewrite keeps every count; this holds it to that.
			_, err = checkLimits(ib)
		}
		if err != nil {
			opts.Logger.Warn("wasm plugin runs with slower interruption checks", "plugin", opts.Name, "err", err)
		} else {
			bin, g.instrumented = ib, true
		}
	}
	cfg := wazero.NewRuntimeConfig().
		WithCompilationCache(p.cache).
		WithMemoryLimitPages(opts.MaxMemoryPages).
		WithCloseOnContextDone(opts.Untrusted && !g.instrumented)
	g.rt = wazero.NewRuntimeWithConfig(ctx, cfg)
	defer func() {
		if err != nil {
			g.shutdown()
		}
	}()
	if g.compiled, err = g.rt.CompileModule(ctx, bin); err != nil {
		return nil, wrapf(ErrModule, "compile: %v", err)
	}
	kindBit, _, _ := opts.Kind.bit()
	if g.shape, err = validateModule(g.compiled, opts.Kind, g.instrumented); err != nil {
		return nil, err
	}
	if _, err = wasi_snapshot_preview1.Instantiate(ctx, g.rt); err != nil {
		return nil, wrapf(ErrInit, "WASI: %v", err)
	}
	if err = g.instantiateHost(ctx); err != nil {
		return nil, wrapf(ErrInit, "host module: %v", err)
	}
	mc := wazero.NewModuleConfig().
		WithName("").
		WithStartFunctions(startFunctions(g.shape.start)...).
		WithStdout(io.Discard).
		WithSysWalltime().
		WithSysNanotime().
		WithRandSource(rand.Reader)
	env := make([]string, 0, len(opts.Env))
	for k := range opts.Env {
		env = append(env, k)
	}
	slices.Sort(env)
	for _, k := range env {
		mc = mc.WithEnv(k, opts.Env[k])
	}
	g.modCfg = mc
	g.sem = make(chan struct{}, opts.PoolSize)

	// The canary: the first instance proves the module starts, accepts its
	// config, serves the kind and passes its own self-tests.
	inst, err := g.newInstance(ctx)
	if err != nil {
		return nil, err
	}
	g.info = abi.Info{Version: abi.Version, Kinds: kindBit}
	if g.shape.hasInfo {
		if err = g.readInfo(ctx, inst); err != nil {
			inst.close(ctx)
			return nil, err
		}
	}
	if !g.info.Kinds.Has(kindBit) {
		inst.close(ctx)
		return nil, wrapf(ErrKind, "module registers no %s (it serves %s)", opts.Kind, kindNames(g.info.Kinds))
	}
	if g.shape.hasSelfTest {
		if err = g.selfTest(ctx, inst); err != nil {
			inst.close(ctx)
			return nil, err
		}
	}
	g.mu.live = 1
	g.mu.idle = append(g.mu.idle, inst)
	return g, nil
}

// startFunctions lists the export an instance starts with: none when the
// module initializes itself from its start section.
func startFunctions(name string) []string {
	if name == "" {
		return nil
	}
	return []string{name}
}

func kindNames(k abi.Kinds) string {
	var names []string
	for _, kind := range []Kind{KindFilter, KindAllocate, KindTxnCheck, KindTransform} {
		if bit, _, _ := kind.bit(); k.Has(bit) {
			names = append(names, string(kind))
		}
	}
	if len(names) == 0 {
		return "nothing"
	}
	return fmt.Sprint(names)
}

// instantiateHost provides module broker_v1 to this generation's runtime.
func (g *generation) instantiateHost(ctx context.Context) error {
	logger := g.opts.Logger.With("plugin", g.opts.Name)
	logFn := func(ctx context.Context, mod api.Module, stack []uint64) {
		level := slog.Level(api.DecodeI32(stack[0]))
		ptr, n := api.DecodeU32(stack[1]), api.DecodeU32(stack[2])
		if !logger.Enabled(ctx, level) {
			return
		}
		b, ok := mod.Memory().Read(ptr, min(n, maxLogLen))
		if !ok {
			return
		}
		logger.Log(ctx, level, string(b))
	}
	nowFn := func(_ context.Context, _ api.Module, stack []uint64) {
		stack[0] = uint64(time.Now().UnixMilli())
	}
	_, err := g.rt.NewHostModuleBuilder(abi.ImportModule).
		NewFunctionBuilder().WithGoModuleFunction(api.GoModuleFunc(logFn), sigLog.params, sigLog.results).Export(abi.ImportLog).
		NewFunctionBuilder().WithGoModuleFunction(api.GoModuleFunc(nowFn), sigNow.params, sigNow.results).Export(abi.ImportNowMs).
		Instantiate(ctx)
	if err != nil || !g.instrumented {
		return err
	}
	_, err = g.rt.NewHostModuleBuilder(interruptModule).
		NewFunctionBuilder().WithGoModuleFunction(api.GoModuleFunc(checkDeadline), sigCheck.params, sigCheck.results).Export(interruptCheck).
		Instantiate(ctx)
	return err
}

// checkDeadline is interruptCheck: it stops the call when the call's
// context (a callContext, or the instantiation's) is past its deadline or
// cancelled, and otherwise grants the next budget. Being a Go function, it
// is also where the scheduler may preempt a long call.
func checkDeadline(ctx context.Context, _ api.Module, stack []uint64) {
	if d, ok := ctx.Deadline(); ok && !time.Now().Before(d) {
		panic(sys.NewExitError(sys.ExitCodeDeadlineExceeded))
	}
	if ctx.Err() != nil {
		panic(sys.NewExitError(sys.ExitCodeContextCanceled))
	}
	stack[0] = api.EncodeI32(interruptBudget)
}

// newInstance instantiates and initializes one instance.
func (g *generation) newInstance(ctx context.Context) (*instance, error) {
	ictx := ctx
	mc := g.modCfg
	var cc *callContext
	switch {
	case g.instrumented:
		// _initialize runs inside InstantiateModule, bounded as a call.
		cc = &callContext{Context: ctx, at: time.Now().Add(initDeadline)}
		ictx = cc
		mc = mc.WithNanosleep(cc.sleep)
	case g.opts.Untrusted:
		// _initialize runs inside InstantiateModule: bound it by the context.
		var cancel context.CancelFunc
		ictx, cancel = context.WithTimeout(ctx, initDeadline)
		defer cancel()
	}
	stderr := &capture{}
	mod, err := g.rt.InstantiateModule(ictx, g.compiled, mc.WithStderr(stderr))
	if err != nil {
		return nil, &callError{err: wrapf(ErrInit, "instantiate: %v", err), poisoned: true, stderr: stderr.String()}
	}
	inst := &instance{
		mod:     mod,
		mem:     mod.Memory(),
		buffer:  mod.ExportedFunction(abi.ExportBuffer),
		stderr:  stderr,
		records: make([]abi.FilterRecord, abi.MaxBatchRecords),
	}
	_, kindExport, _ := g.opts.Kind.bit()
	inst.kindFn = mod.ExportedFunction(kindExport)
	switch {
	case cc != nil:
		cc.Context = context.Background()
		inst.cc = cc
		inst.deadline = initDeadline
	case g.opts.Untrusted:
		inst.watch(initDeadline)
	}
	if err := inst.init(ctx, mod.ExportedFunction(abi.ExportInit), g.opts.Config); err != nil {
		inst.close(ctx)
		return nil, initError(err)
	}
	if err := inst.ensureBuffer(ctx, defaultBufferSize); err != nil {
		inst.close(ctx)
		return nil, initError(err)
	}
	if g.opts.Untrusted {
		inst.deadline = g.opts.Deadline
	}
	inst.calls = 0
	return inst, nil
}

// initError marks an error met while starting an instance as ErrInit,
// keeping its classification.
func initError(err error) error {
	if ce, ok := err.(*callError); ok {
		ce.err = fmt.Errorf("%w: %w", ErrInit, ce.err)
		return ce
	}
	if errors.Is(err, ErrInit) {
		return err
	}
	return fmt.Errorf("%w: %w", ErrInit, err)
}

// readInfo reads and checks the module's info block.
func (g *generation) readInfo(ctx context.Context, inst *instance) error {
	b, err := inst.packed(ctx, inst.mod.ExportedFunction(abi.ExportInfo), abi.MaxInfoLen)
	if err != nil {
		return err
	}
	info, err := abi.ReadInfo(b)
	if err != nil {
		return wrapf(ErrOutput, "broker_info: %v", err)
	}
	if err := checkABI(info); err != nil {
		return err
	}
	g.info = info
	return nil
}

// checkABI applies the ABI's compatibility rule to a module's info block:
// the host's major, and a minor no later than the host's (a newer guest may
// count on what this host does not do).
func checkABI(info abi.Info) error {
	switch {
	case info.Version != abi.Version:
		return wrapf(ErrABIVersion, "module reports ABI v%d; this broker speaks v%d", info.Version, abi.Version)
	case info.Minor > abi.Minor:
		return wrapf(ErrABIVersion, "module is built for ABI v%d.%d, newer than this broker's v%d.%d: upgrade the broker, or build the module with an sdk of ABI v%d.%d",
			info.Version, info.Minor, abi.Version, abi.Minor, abi.Version, abi.Minor)
	}
	return nil
}

// selfTest replays the module's vectors of the plugin's kind through inst.
func (g *generation) selfTest(ctx context.Context, inst *instance) error {
	blob, err := inst.packed(ctx, inst.mod.ExportedFunction(abi.ExportSelfTest), abi.MaxSelfTestLen)
	if err != nil || blob == nil {
		return err
	}
	vs, err := abi.ReadVectors(blob)
	if err != nil {
		return wrapf(ErrOutput, "broker_selftest: %v", err)
	}
	kindBit, _, _ := g.opts.Kind.bit()
	for i, v := range vs {
		if v.Kind != kindBit {
			continue
		}
		if g.opts.Kind == KindTransform {
			if err := replayTransform(ctx, inst, i, v); err != nil {
				return err
			}
			g.tests++
			continue
		}
		got, err := g.replay(ctx, inst, v)
		if err != nil {
			return fmt.Errorf("%w: vector %d: %w", ErrSelfTest, i, err)
		}
		if !bytes.Equal(got, v.Out) {
			return wrapf(ErrSelfTest, "vector %d: output %x, want %x", i, got, v.Out)
		}
		g.tests++
	}
	return nil
}

// replayTransform runs transform vector i through inst and compares the
// outcome with the one the vector expects (ABI v1.3): the error names the
// vector's test.
func replayTransform(ctx context.Context, inst *instance, i int, v abi.Vector) error {
	e, err := abi.ReadTransformExpectation(v.Out)
	if err != nil {
		return wrapf(ErrOutput, "broker_selftest: vector %d: %v", i, err)
	}
	var rec abi.TransformRecord
	if err := abi.ReadTransformRecord(v.In, &rec); err != nil {
		return wrapf(ErrOutput, "broker_selftest: vector %d (transform test %q): %v", i, e.Name, err)
	}
	m := TransformMessage{Topic: string(rec.Topic), SysFlag: int32(rec.SysFlag), Properties: rec.Properties, Body: rec.Body}
	var out TransformResult
	if err := transformCall(ctx, inst, &m, &out); err != nil {
		return fmt.Errorf("%w: vector %d (transform test %q): %w", ErrSelfTest, i, e.Name, err)
	}
	var got *abi.TransformResult
	switch {
	case out.Reject:
		got = &abi.TransformResult{Action: abi.TransformReject, Reason: []byte(out.Reason)}
	case out.Changed():
		got = &abi.TransformResult{Action: abi.TransformChange, Properties: out.Properties, Body: out.Body}
		if out.Topic != "" {
			got.Topic = []byte(out.Topic)
		}
	}
	if err := e.Check(&rec, got); err != nil {
		return wrapf(ErrSelfTest, "vector %d (transform test %q): %v", i, e.Name, err)
	}
	return nil
}

// replay runs one vector's raw input through the kind's function.
func (g *generation) replay(ctx context.Context, inst *instance, v abi.Vector) ([]byte, error) {
	inLen := uint32(len(v.In))
	if int(v.Count) > abi.MaxBatchRecords || len(v.In) > abi.MaxAllocateLen {
		return nil, wrapf(ErrOutput, "vector of %d records and %d bytes is over the limits", v.Count, inLen)
	}
	outLen := v.Count
	if g.opts.Kind == KindTxnCheck {
		outLen *= abi.TxnResultLen
	}
	if err := inst.ensureBuffer(ctx, uint32(abi.OutOffset(int(inLen)))+outLen); err != nil {
		return nil, err
	}
	copy(inst.view(0, inLen), v.In)
	if g.opts.Kind == KindAllocate {
		return inst.allocate(ctx, inLen, 1<<30)
	}
	out, err := inst.batch(ctx, inLen, v.Count, outLen)
	return bytes.Clone(out), err
}

// errDisabled returns the error calls get once the generation is disabled.
func (g *generation) errDisabled() error {
	if e := g.disabled.Load(); e != nil {
		return *e
	}
	return nil
}

// get takes an instance from the pool, creating one if none is idle and the
// pool is not full, waiting otherwise.
func (g *generation) get(ctx context.Context) (*instance, error) {
	if err := g.errDisabled(); err != nil {
		return nil, err
	}
	select {
	case g.sem <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	g.mu.Lock()
	if n := len(g.mu.idle); n > 0 {
		inst := g.mu.idle[n-1]
		g.mu.idle[n-1] = nil
		g.mu.idle = g.mu.idle[:n-1]
		g.mu.Unlock()
		return inst, nil
	}
	wait := time.Until(g.mu.nextCreate)
	g.mu.Unlock()
	if wait > 0 {
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			<-g.sem
			return nil, ctx.Err()
		}
	}
	inst, err := g.newInstance(ctx)
	if err != nil {
		<-g.sem
		g.failed(err)
		return nil, err
	}
	g.mu.Lock()
	g.mu.live++
	g.mu.Unlock()
	return inst, nil
}

// put returns an instance to the pool after a call. A poisoned instance, or
// one that served its RecycleAfter calls, is closed instead.
func (g *generation) put(inst *instance, err error) {
	poisoned := err != nil && isPoisoned(err)
	if poisoned {
		g.failed(err)
	} else if g.failures.Load() != 0 {
		g.failures.Store(0)
	}
	if poisoned || (g.opts.RecycleAfter > 0 && inst.calls >= g.opts.RecycleAfter) {
		inst.close(context.Background())
		g.mu.Lock()
		g.mu.live--
		g.mu.Unlock()
	} else {
		g.mu.Lock()
		g.mu.idle = append(g.mu.idle, inst)
		g.mu.Unlock()
	}
	<-g.sem
}

// isPoisoned reports whether err left its instance unusable.
func isPoisoned(err error) bool {
	var ce *callError
	return errors.As(err, &ce) && ce.poisoned
}

// failed counts a trap, a timeout or a failed start, delays the next
// instance, and disables the generation after MaxFailures in a row.
func (g *generation) failed(err error) {
	n := g.failures.Add(1)
	backoff := backoffMax
	if n < 8 {
		backoff = min(backoffBase<<(n-1), backoffMax)
	}
	g.mu.Lock()
	g.mu.nextCreate = time.Now().Add(backoff)
	g.mu.Unlock()
	if int(n) >= g.opts.MaxFailures {
		d := fmt.Errorf("%w: %d failures in a row, the last: %w", ErrDisabled, n, err)
		if g.disabled.CompareAndSwap(nil, &d) {
			g.opts.Logger.Error("wasm plugin disabled", "plugin", g.opts.Name, "failures", n, "err", err)
		}
	}
}

// acquire counts a call in flight; release ends it.
func (g *generation) release() {
	if g.refs.Add(-1) == 0 && g.retired.Load() {
		g.shutdown()
	}
}

// retire marks the generation replaced: it closes once its calls return.
func (g *generation) retire() {
	g.retired.Store(true)
	if g.refs.Load() == 0 {
		g.shutdown()
	}
}

// shutdown closes the runtime (and every instance in it) and the compiled
// code, once.
func (g *generation) shutdown() {
	g.closeOnce.Do(func() {
		ctx := context.Background()
		if g.rt != nil {
			_ = g.rt.Close(ctx)
		}
		if g.compiled != nil {
			_ = g.compiled.Close(ctx)
		}
		g.mu.Lock()
		g.mu.idle, g.mu.live = nil, 0
		g.mu.Unlock()
		close(g.done)
	})
}
