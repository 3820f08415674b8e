package wasm

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"sync/atomic"

	"github.com/rmq-go/rmq/core/message"
	"github.com/rmq-go/rmq/sdk/abi"
)

// Filter is one subscription expression compiled against a filter plugin.
// It satisfies the broker's Filter interface. It is safe for concurrent use
// and follows the plugin across reloads: each Match runs on whichever module
// is serving at the time.
type Filter struct {
	p    *Plugin
	expr string
	proj atomic.Pointer[projection] // what the serving module reads
}

// projection is the properties a module's filter reads for one expression.
type projection struct {
	seq  int      // the generation it was asked of
	all  bool     // every property
	keys [][]byte // else only these
	// values: the module takes the named keys' values resolved
	// (abi.FlagFilterValues); named are the keys as the module listed
	// them, and bit i of dead is set for a key holding 0x01, which names
	// no property.
	values bool
	named  [][]byte
	dead   uint64
}

// Filter checks expression with the plugin (which compiles it and reports a
// syntax error) and returns the Filter that evaluates it. Its failure policy
// is the serving module's FailurePolicy.
func (p *Plugin) Filter(expression string) (*Filter, error) {
	if p.kind != KindFilter {
		return nil, &Error{Plugin: p.name, Op: "filter", Err: wrapf(ErrKind, "plugin is a %s plugin", p.kind)}
	}
	if len(expression) > abi.MaxExpressionLen {
		return nil, &Error{Plugin: p.name, Op: "filter", Err: wrapf(ErrExpression,
			"expression of %d bytes is longer than %d", len(expression), abi.MaxExpressionLen)}
	}
	f := &Filter{p: p, expr: expression}
	err := p.run(context.Background(), "filter", func(g *generation, inst *instance) (int, error) {
		pr, err := checkExpression(g, inst, expression)
		f.proj.Store(pr)
		return 0, err
	})
	if err != nil {
		return nil, err
	}
	return f, nil
}

// checkExpression has the module compile expr and returns what it reads:
// broker_filter_keys if the module has it, else a batch of no records.
func checkExpression(g *generation, inst *instance, expr string) (*projection, error) {
	ctx := context.Background()
	inLen := abi.FilterHeaderLen(len(expr))
	abi.AppendFilterHeader(inst.view(0, uint32(inLen))[:0], expr)
	pr := &projection{seq: g.seq, all: true}
	if !g.shape.hasFilterKeys {
		_, err := inst.batch(ctx, uint32(inLen), 0, 0)
		return pr, err
	}
	b, err := inst.packedCall(ctx, inst.mod.ExportedFunction(abi.ExportFilterKeys), uint32(inLen))
	if err != nil || b == nil {
		return pr, err
	}
	keys, err := abi.ReadKeyList(b)
	if err != nil {
		return nil, wrapf(ErrOutput, "broker_filter_keys: %v", err)
	}
	pr.all, pr.keys = false, projectable(keys)
	if g.info.Flags.Has(abi.FlagFilterValues) {
		pr.values = true
		pr.named = make([][]byte, len(keys))
		for i, k := range keys {
			pr.named[i] = []byte(k)
			if strings.Contains(k, "\x01") {
				pr.dead |= 1 << i
			}
		}
	}
	return pr, nil
}

// projectable returns the keys scanProperties projects on: those without
// 0x01, since a key holding one names no property (the format ends a key
// at its first 0x01) and scanProperties counts on there being none.
func projectable(keys []string) [][]byte {
	out := make([][]byte, 0, len(keys))
	for _, k := range keys {
		if !strings.Contains(k, "\x01") {
			out = append(out, []byte(k))
		}
	}
	return out
}

// Expression returns the expression f evaluates.
func (f *Filter) Expression() string { return f.expr }

// MatchTagHash returns true: a plugin decides on the whole record.
func (f *Filter) MatchTagHash(int64) bool { return true }

// NeedsRecord returns true: every entry goes to Match.
func (f *Filter) NeedsRecord() bool { return true }

// Match sets out[i] for each record of batch, in calls of at most
// abi.MaxBatchRecords records and abi.MaxBatchBytes bytes. The records must
// be well-formed (message.Record.Validate). Under PolicyHold an error is
// returned and out is not meaningful: an error never means "no match".
// Under PolicyOpen the error is counted and every record from the failed
// call on matches.
func (f *Filter) Match(batch []message.Record, out []bool) error {
	if len(out) != len(batch) {
		panic(fmt.Sprintf("wasm: Match with %d records and %d results", len(batch), len(out)))
	}
	if len(batch) == 0 {
		return nil
	}
	done := 0
	err := f.p.run(context.Background(), "filter", func(g *generation, inst *instance) (int, error) {
		pr := f.proj.Load()
		if pr == nil || pr.seq != g.seq {
			// The module changed since the expression was checked.
			var err error
			if pr, err = checkExpression(g, inst, f.expr); err != nil {
				return 0, err
			}
			f.proj.Store(pr)
		}
		body := bodyNone
		switch {
		case g.info.Flags.Has(abi.FlagFilterBody | abi.FlagFilterBodyInflated):
			body = bodyInflated
		case g.info.Flags.Has(abi.FlagFilterBody):
			body = bodyStored
		}
		for done < len(batch) {
			n, err := matchCall(g, inst, f.expr, pr, batch[done:], out[done:], body)
			if err != nil {
				return done, err
			}
			done += n
		}
		return done, nil
	})
	if err != nil && f.p.failOpen() {
		for i := done; i < len(out); i++ {
			out[i] = true
		}
		return nil
	}
	return err
}

// failOpen reports whether the serving module's policy is PolicyOpen.
func (p *Plugin) failOpen() bool {
	g := p.cur.Load()
	return g != nil && g.opts.FailurePolicy == PolicyOpen
}

// bodyMode is what a filter module gets of message bodies.
type bodyMode uint8

const (
	bodyNone     bodyMode = iota // no bodies
	bodyStored                   // bodies as stored
	bodyInflated                 // bodies inflated when compressed (and they inflate)
)

// fill describes r for the guest. The slices alias r, except projected
// properties and inflated bodies, which are appended to scratch.
func fill(inst *instance, fr *abi.FilterRecord, r message.Record, body bodyMode, pr *projection, scratch []byte) []byte {
	props := r.Properties()
	start := len(scratch)
	var tags, keys []byte
	if pr.values {
		tags, keys, scratch = resolveProperties(scratch, props, pr.named, pr.dead, &inst.vals)
	} else {
		tags, keys, scratch = scanProperties(scratch, props, !pr.all, pr.keys)
	}
	*fr = abi.FilterRecord{
		QueueID:        r.QueueID(),
		QueueOffset:    r.QueueOffset(),
		BornTimestamp:  r.BornTimestamp(),
		StoreTimestamp: r.StoreTimestamp(),
		ReconsumeTimes: r.ReconsumeTimes(),
		SysFlag:        r.SysFlag(),
		Topic:          r.Topic(),
		Tags:           tags,
		Keys:           keys,
		Properties:     props,
	}
	if !pr.all {
		fr.Properties = scratch[start:len(scratch):len(scratch)]
	}
	if body != bodyNone {
		fr.Body, fr.HasBody = r.Body(), true
	}
	if body == bodyInflated && fr.SysFlag&message.SysFlagCompressed != 0 {
		start := len(scratch)
		var ok bool
		if scratch, ok = inst.inflate(scratch, fr.Body); ok {
			fr.Body = scratch[start:len(scratch):len(scratch)]
			fr.SysFlag &^= message.SysFlagCompressed
		}
	}
	return scratch
}

// scanProperties reads p once for the filter record: it returns the TAGS
// and KEYS properties, with message.Properties.Lookup's rules (malformed
// pieces are skipped and the last value of a key wins), and, when
// projecting, appends to dst the pieces of p whose key is one of keys, in
// order and whole (malformed ones too: the reader skips them as it would
// in p), each ended by 0x02, so that looking up a listed key in the result
// gives what it gives in p.
func scanProperties(dst []byte, p message.Properties, projecting bool, keys [][]byte) (tags, keyList, out []byte) {
	for rest := []byte(p); len(rest) > 0; {
		piece := rest
		if i := bytes.IndexByte(rest, 0x02); i >= 0 {
			piece, rest = rest[:i], rest[i+1:]
		} else {
			rest = nil
		}
		// Both TAGS and KEYS are four bytes long, so the separator must
		// follow them.
		if len(piece) >= 5 && piece[4] == 0x01 {
			if k := string(piece[:4]); k == message.PropertyTags || k == message.PropertyKeys {
				if v := piece[5:]; bytes.IndexByte(v, 0x01) < 0 {
					if k == message.PropertyTags {
						tags = v
					} else {
						keyList = v
					}
				}
			}
		}
		if !projecting {
			continue
		}
		// The key is piece up to its first 0x01 (all of it if none), so it
		// is want when piece starts with want followed by 0x01 or nothing:
		// keys hold no 0x01 (checkExpression drops those), and comparing
		// prefixes spares finding the separator in every piece.
		for _, want := range keys {
			if n := len(want); len(piece) >= n && (len(piece) == n || piece[n] == 0x01) && string(piece[:n]) == string(want) {
				dst = append(dst, piece...)
				dst = append(dst, 0x02)
				break
			}
		}
	}
	return tags, keyList, dst
}

// resolveProperties reads p once for the filter record of a module that
// takes resolved values: it returns the TAGS and KEYS properties as
// scanProperties does and appends to dst, for each of keys in order, the
// value message.Properties.Lookup gives it (the last of a well-formed pair)
// or abi.ValueAbsent. Keys whose bit is set in dead (they hold 0x01) are
// absent. vals is scratch, cleared before it returns. A value too long for
// the layout is written as its length only, which makes the record's
// properties too long for the layout: the caller's EncodedLen check fails.
func resolveProperties(dst []byte, p message.Properties, keys [][]byte, dead uint64, vals *[abi.MaxFilterKeys][]byte) (tags, keyList, out []byte) {
	var found uint64
	for rest := []byte(p); len(rest) > 0; {
		piece := rest
		if i := bytes.IndexByte(rest, 0x02); i >= 0 {
			piece, rest = rest[:i], rest[i+1:]
		} else {
			rest = nil
		}
		if len(piece) >= 5 && piece[4] == 0x01 {
			if k := string(piece[:4]); k == message.PropertyTags || k == message.PropertyKeys {
				if v := piece[5:]; bytes.IndexByte(v, 0x01) < 0 {
					if k == message.PropertyTags {
						tags = v
					} else {
						keyList = v
					}
				}
			}
		}
		// As in scanProperties, a piece is want's pair when it starts with
		// want and a 0x01; it is well formed when no other 0x01 follows.
		for i, want := range keys {
			if n := len(want); len(piece) > n && piece[n] == 0x01 && dead&(1<<i) == 0 && string(piece[:n]) == string(want) {
				if v := piece[n+1:]; bytes.IndexByte(v, 0x01) < 0 {
					vals[i] = v
					found |= 1 << i
				}
			}
		}
	}
	for i := range keys {
		v, ok := vals[i], found&(1<<i) != 0
		if ok && len(v) > abi.MaxValueLen {
			dst = append(dst, 0xFE, 0xFF)
			dst = append(dst, v...)
		} else {
			dst, _ = abi.AppendFilterValue(dst, v, ok)
		}
		vals[i] = nil
	}
	return tags, keyList, dst
}

// matchCall runs one broker_filter call over a prefix of batch and returns
// how many records it covered.
func matchCall(g *generation, inst *instance, expr string, pr *projection, batch []message.Record, out []bool, body bodyMode) (int, error) {
	inLen := abi.FilterHeaderLen(len(expr))
	count := 0
	scratch := inst.props[:0]
	for count < len(batch) && count < abi.MaxBatchRecords {
		fr := &inst.records[count]
		before := scratch
		scratch = fill(inst, fr, batch[count], body, pr, scratch)
		n := fr.EncodedLen()
		if n < 0 {
			return 0, wrapf(ErrFailed, "record at queue offset %d does not fit the filter layout", batch[count].QueueOffset())
		}
		// A record too large for a batch of its own travels alone.
		if count > 0 && inLen+n > abi.MaxBatchBytes {
			scratch = before
			break
		}
		inLen += n
		count++
	}
	inst.props = scratch
	defer clear(inst.records[:count]) // drop the references into the caller's records
	ctx := context.Background()
	if err := inst.ensureBuffer(ctx, uint32(abi.OutOffset(inLen)+count)); err != nil {
		return 0, err
	}
	dst := abi.AppendFilterHeader(inst.view(0, uint32(inLen))[:0], expr)
	for i := range count {
		dst = abi.AppendFilterRecord(dst, &inst.records[i])
	}
	res, err := inst.batch(ctx, uint32(inLen), uint32(count), uint32(count))
	if err != nil {
		return 0, err
	}
	for i, b := range res {
		switch b {
		case abi.FilterMatch:
			out[i] = true
		case abi.FilterNoMatch:
			out[i] = false
		default:
			return 0, wrapf(ErrOutput, "broker_filter left result %d of %d at %d", i, count, b)
		}
	}
	return count, nil
}
