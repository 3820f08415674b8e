package server

import (
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/rmq-go/rmq/core/broker"
	"github.com/rmq-go/rmq/core/message"
	"github.com/rmq-go/rmq/plugins/wasm"
)

// factory returns the broker's FilterFactory for a plugin expression type.
func (h *pluginHost) factory(typ string) broker.FilterFactory {
	return broker.FilterFactoryFunc(func(expr string) (broker.Filter, error) {
		f := &pluginFilter{h: h, typ: typ, expr: expr}
		// Bind now so a bad expression is refused when the client
		// subscribes, with the plugin's reason.
		if _, err := f.bind(); err != nil {
			return nil, err
		}
		return f, nil
	})
}

// pluginFilter is a subscription expression of a plugin expression type. A
// reload of its plugin needs nothing from it (a *wasm.Filter runs on
// whichever module serves); when another plugin takes the type over, it
// compiles the expression again against that one on its next Match.
type pluginFilter struct {
	h         *pluginHost
	typ, expr string
	mu        sync.Mutex // serializes rebinding
	cur       atomic.Pointer[boundFilter]
}

// boundFilter is the expression compiled against one plugin.
type boundFilter struct {
	p *wasm.Plugin
	f *wasm.Filter
}

// bind returns the expression compiled against the plugin serving the
// type now.
func (f *pluginFilter) bind() (*boundFilter, error) {
	p := f.h.set.Load().filters[f.typ]
	if p == nil {
		return nil, fmt.Errorf("no plugin serves expression type %s since the last plugin reload", f.typ)
	}
	if b := f.cur.Load(); b != nil && b.p == p {
		return b, nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if b := f.cur.Load(); b != nil && b.p == p {
		return b, nil
	}
	wf, err := p.Filter(f.expr)
	if err != nil {
		return nil, err
	}
	b := &boundFilter{p: p, f: wf}
	f.cur.Store(b)
	return b, nil
}

// MatchTagHash returns true: the plugin decides on the whole record.
func (f *pluginFilter) MatchTagHash(int64) bool { return true }

// NeedsRecord returns true.
func (f *pluginFilter) NeedsRecord() bool { return true }

// Match runs the plugin serving the type now. Any failure is returned, so
// the broker holds the subscription; the plugin's failure policy may turn
// its own errors into matches.
func (f *pluginFilter) Match(batch []message.Record, out []bool) error {
	b, err := f.bind()
	if err != nil {
		return err
	}
	return b.f.Match(batch, out)
}
