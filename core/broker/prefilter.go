package broker

import (
	"encoding/binary"
	"encoding/json"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rmq-go/rmq/core/message"
	"github.com/rmq-go/rmq/core/store"
)

// Pre-filtering.
//
// An SQL92 subscription must read each record to filter it, which costs a
// commit-log read per message, matching or not. For these subscriptions
// the broker evaluates the expression once per message as it arrives and
// keeps the answer in the index, so a selective subscription skips what
// does not match without reading it.
//
// Each topic has up to 64 registered expressions, one bit each. An indexer
// goroutine reads each queue from its progress ("pf/<topic>/<queue>"),
// evaluates every registered expression on the records, and stores the
// results as one 64-bit mask per message, 64 messages per index key:
//
//	"f" topic 0x00 queueID(4) block(8) → up to 64 little-endian uint64 masks
//
// A bit registered while the indexer stood at offset s of a queue answers
// for offsets from s up to the queue's progress; every other offset is
// filtered at pull time, as without pre-filtering. A mask can be lost in a
// crash (the keys are written without fsync); the progress is written
// after them in the index's order, so the indexer redoes what was lost.
const (
	prefilterBits      = 64
	prefilterMetaKey   = "prefilter/"
	prefilterProgress  = "pf/"
	prefilterScanUnits = 8192 // units a pre-filtered pull may scan
	prefilterKeyKind   = 'f'
)

type prefilter struct {
	log   *slog.Logger
	store *store.Store
	// topic looks up a topic's configuration (the topic table).
	topic func(name string) (TopicConfig, bool)

	kick    chan struct{}
	skipped atomic.Int64 // messages pulls skipped on their mask alone
	// pass is held by an indexing pass, and by drop so that no pass
	// writes a deleted topic's masks or progress after it.
	pass sync.Mutex

	mu     sync.Mutex
	topics map[string]*pfTopic
}

type pfTopic struct {
	name string
	bits []*pfBit
}

// pfBit is one registered expression of a topic.
type pfBit struct {
	Name   string          `json:"name"` // "TYPE expression"
	Type   string          `json:"type"`
	Expr   string          `json:"expr"`
	Since  map[int32]int64 `json:"since"` // per queue: the first offset evaluated
	filter Filter
}

// newPrefilter loads the pre-filter registry from st, compiling each
// registered expression with compile.
func newPrefilter(log *slog.Logger, st *store.Store, topic func(string) (TopicConfig, bool), compile func(typ, expr string) (Filter, error)) (*prefilter, error) {
	pf := &prefilter{log: log, store: st, topic: topic, kick: make(chan struct{}, 1), topics: map[string]*pfTopic{}}
	err := st.EachMeta(prefilterMetaKey, func(name string, v []byte) error {
		var bits []*pfBit
		if err := json.Unmarshal(v, &bits); err != nil {
			log.Error("pre-filter registry unreadable; starting it again", "key", name, "err", err)
			return nil
		}
		t := &pfTopic{name: name[len(prefilterMetaKey):], bits: bits}
		for _, bit := range bits {
			// A type now served by something that is not pure (a plugin
			// replacing SQL92) keeps no pre-filter: its masks were made by
			// another filter.
			if f, err := compile(bit.Type, bit.Expr); err == nil && isPure(f) {
				bit.filter = f
			}
		}
		pf.topics[t.name] = t
		return nil
	})
	return pf, err
}

// pfMaskPrefix is the start of every mask key of a topic.
func pfMaskPrefix(topic string) []byte {
	k := make([]byte, 0, 1+len(topic)+1)
	k = append(k, prefilterKeyKind)
	k = append(k, topic...)
	return append(k, 0)
}

func pfMaskKey(topic string, q int32, block int64) []byte {
	k := make([]byte, 0, 1+len(topic)+1+4+8)
	k = append(k, prefilterKeyKind)
	k = append(k, topic...)
	k = append(k, 0)
	k = binary.BigEndian.AppendUint32(k, uint32(q))
	return binary.BigEndian.AppendUint64(k, uint64(block))
}

func pfProgressName(topic string, q int32) string {
	return prefilterProgress + topic + "/" + strconv.Itoa(int(q))
}

// register makes sure a topic's expression is pre-filtered from now on.
func (pf *prefilter) register(topic, typ, expr string, f Filter) {
	// Only SQL92: it never fails on a record, so a mask is always a true
	// answer. A plugin filter's error must hold its subscription, which a
	// precomputed mask cannot do.
	if pf == nil || typ != ExpressionSQL92 || !isPure(f) || systemTopic(topic) || isRetryTopic(topic) {
		return
	}
	name := typ + " " + expr
	pf.mu.Lock()
	t := pf.topics[topic]
	if t == nil {
		t = &pfTopic{name: topic}
		pf.topics[topic] = t
	}
	for _, bit := range t.bits {
		if bit.Name == name {
			if bit.filter == nil && isPure(f) {
				bit.filter = f
			}
			pf.mu.Unlock()
			return
		}
	}
	if len(t.bits) == prefilterBits {
		pf.mu.Unlock()
		return // evaluated at pull time, as without pre-filtering
	}
	bit := &pfBit{Name: name, Type: typ, Expr: expr, Since: map[int32]int64{}, filter: f}
	tc, _ := pf.topic(topic)
	for q := int32(0); q < int32(max(tc.ReadQueueNums, tc.WriteQueueNums)); q++ {
		bit.Since[q] = pf.progress(topic, q)
	}
	t.bits = append(t.bits, bit)
	v, _ := json.Marshal(t.bits)
	pf.mu.Unlock()
	if err := pf.store.PutMeta(prefilterMetaKey+topic, v); err != nil {
		pf.log.Warn("pre-filter registry not saved", "topic", topic, "err", err)
	}
	pf.log.Info("subscription pre-filtered", "topic", topic, "filter", name, "bit", len(t.bits)-1)
	pf.wake()
}

// progress is the next offset the indexer evaluates in a queue. A queue
// the indexer never saw starts at its current end: what is already stored
// is filtered at pull time.
func (pf *prefilter) progress(topic string, q int32) int64 {
	if v, ok := pf.store.Progress(pfProgressName(topic, q)); ok {
		return v
	}
	v := pf.store.MaxOffset(topic, q)
	pf.store.SetProgress(pfProgressName(topic, q), v)
	return v
}

func (pf *prefilter) wake() {
	select {
	case pf.kick <- struct{}{}:
	default:
	}
}

// arrived wakes the indexer for topics with registered expressions.
func (pf *prefilter) arrived(topic string) {
	if pf == nil {
		return
	}
	pf.mu.Lock()
	_, ok := pf.topics[topic]
	pf.mu.Unlock()
	if ok {
		pf.wake()
	}
}

// loop runs the indexer until quit is closed.
func (pf *prefilter) loop(quit <-chan struct{}) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-quit:
			return
		case <-pf.kick:
		case <-t.C:
		}
		pf.indexAll()
	}
}

// drop forgets a deleted topic's expressions, masks and progress. A
// subscription to the topic created again registers its expression anew.
func (pf *prefilter) drop(topic string) {
	if pf == nil {
		return
	}
	pf.pass.Lock() // no indexing pass writes the topic's masks meanwhile
	defer pf.pass.Unlock()
	pf.mu.Lock()
	_, ok := pf.topics[topic]
	delete(pf.topics, topic)
	pf.mu.Unlock()
	pf.store.DeleteProgress(prefilterProgress + topic + "/")
	if err := pf.store.DeleteKeyRange(pfMaskPrefix(topic)); err != nil {
		pf.log.Warn("pre-filter masks of a deleted topic not removed", "topic", topic, "err", err)
	}
	if ok {
		if err := pf.store.DeleteMeta(prefilterMetaKey + topic); err != nil {
			pf.log.Warn("pre-filter registry of a deleted topic not removed", "topic", topic, "err", err)
		}
	}
}

// indexAll evaluates what arrived since the last pass.
func (pf *prefilter) indexAll() {
	pf.pass.Lock()
	defer pf.pass.Unlock()
	pf.mu.Lock()
	type job struct {
		topic string
		bits  []*pfBit
	}
	var jobs []job
	for name, t := range pf.topics {
		jobs = append(jobs, job{name, slices.Clone(t.bits)})
	}
	pf.mu.Unlock()
	for _, j := range jobs {
		tc, ok := pf.topic(j.topic)
		if !ok {
			continue
		}
		for q := int32(0); q < int32(max(tc.ReadQueueNums, tc.WriteQueueNums)); q++ {
			if err := pf.indexQueue(j.topic, q, j.bits); err != nil {
				pf.log.Error("pre-filter indexing failed; pulls filter as usual", "topic", j.topic, "queue", q, "err", err)
			}
		}
	}
}

// indexQueue evaluates the records of a queue from its progress to its
// end, one mask block at a time.
func (pf *prefilter) indexQueue(topic string, q int32, bits []*pfBit) error {
	from := pf.progress(topic, q)
	var blockEnd int64
	it := pf.store.NewQueueIter(topic, q, store.IterOptions{Filter: func(u store.Unit) store.UnitVerdict {
		if u.QueueOffset >= blockEnd {
			return store.UnitStop
		}
		return store.UnitKeep
	}})
	defer it.Close()
	var (
		arena []byte // the block's records
		recs  []pfRec
		block []byte
	)
	for {
		blockEnd = (from/blockUnitsPF + 1) * blockUnitsPF
		arena, recs = arena[:0], recs[:0]
		gapTo := from
		for ok := it.SeekGE(from); ok; ok = it.Next() {
			if _, to := it.Gap(); to > gapTo {
				gapTo = to
				break
			}
			at := len(arena)
			arena = append(arena, it.Record()...)
			recs = append(recs, pfRec{at: at, end: len(arena), off: it.Offset()})
		}
		if err := it.Error(); err != nil {
			return err
		}
		if _, to := it.Gap(); to > gapTo {
			gapTo = to
		}
		if gapTo > from {
			// Retention removed offsets: everything before them is gone
			// too, so the block starts again after them.
			from = gapTo
			continue
		}
		end := it.NextOffset()
		if end == from {
			return nil
		}
		masks := make([]uint64, end-from)
		if err := pf.evaluate(bits, arena, recs, func(i int, bit uint) { masks[recs[i].off-from] |= 1 << bit }); err != nil {
			// Leave the bits unset and the progress where it is: an unset
			// bit is only trusted where the filter succeeded, so the run is
			// evaluated at pull time.
			return err
		}
		key := pfMaskKey(topic, q, from/blockUnitsPF)
		var err error
		if block, _, err = pf.store.Value(key, block[:0]); err != nil {
			return err
		}
		at := int(from%blockUnitsPF) * 8
		block = append(block, make([]byte, max(0, at-len(block)))...)[:at]
		for _, m := range masks {
			block = binary.LittleEndian.AppendUint64(block, m)
		}
		if err := pf.store.PutValues(store.KV{Key: key, Value: block}); err != nil {
			return err
		}
		from = end
		pf.store.SetProgress(pfProgressName(topic, q), from)
	}
}

// evaluate runs every bit's filter on the records of arena and calls set
// for each record a bit's filter accepts.
func (pf *prefilter) evaluate(bits []*pfBit, arena []byte, recs []pfRec, set func(i int, bit uint)) error {
	batch := make([]message.Record, len(recs))
	for i, r := range recs {
		batch[i] = message.Record(arena[r.at:r.end])
	}
	out := make([]bool, len(recs))
	for b, bit := range bits {
		if bit.filter == nil {
			continue
		}
		if err := bit.filter.Match(batch, out); err != nil {
			return err
		}
		for i, ok := range out {
			if ok {
				set(i, uint(b))
			}
		}
	}
	return nil
}

// pfRec is a record read by the indexer: its place in the arena.
type pfRec struct {
	at, end int
	off     int64
}

// blockUnitsPF is the number of masks kept under one key.
const blockUnitsPF = 64

// masks returns the reader of the masks that answer for a pull of
// topic/queue with the named filter, or nil if none do.
func (pf *prefilter) masks(topic string, q int32, name string) *maskReader {
	if pf == nil {
		return nil
	}
	pf.mu.Lock()
	t := pf.topics[topic]
	if t == nil {
		pf.mu.Unlock()
		return nil
	}
	for i, b := range t.bits {
		if b.Name == name && b.filter != nil {
			since, found := b.Since[q]
			pf.mu.Unlock()
			if !found {
				return nil
			}
			until, _ := pf.store.Progress(pfProgressName(topic, q))
			if until <= since {
				return nil
			}
			return &maskReader{pf: pf, topic: topic, q: q, bit: uint(i), since: since, until: until}
		}
	}
	pf.mu.Unlock()
	return nil
}

// maskReader reads one bit of the masks of a queue, block by block, for
// one pull. Its bit answers for offsets in [since, until).
type maskReader struct {
	pf           *prefilter
	topic        string
	q            int32
	bit          uint
	since, until int64
	no           int64
	block        []byte
}

// says returns what the mask of a message says: whether it matches, and
// whether a mask answers for it at all. A nil reader knows nothing.
func (r *maskReader) says(off int64) (match, known bool) {
	if r == nil {
		return false, false
	}
	m, ok := r.mask(off)
	return ok && m&(1<<r.bit) != 0, ok
}

// mask returns the mask of a message, and false if none answers for it.
func (r *maskReader) mask(off int64) (uint64, bool) {
	if off < r.since || off >= r.until {
		return 0, false
	}
	no := off / blockUnitsPF
	if r.block == nil || no != r.no {
		var ok bool
		var err error
		r.block, ok, err = r.pf.store.Value(pfMaskKey(r.topic, r.q, no), r.block[:0])
		if err != nil || !ok {
			r.block = nil
			return 0, false
		}
		r.no = no
	}
	at := int(off%blockUnitsPF) * 8
	if at+8 > len(r.block) {
		return 0, false
	}
	return binary.LittleEndian.Uint64(r.block[at:]), true
}

// PureFilter is implemented by filters whose answer depends on the record
// alone and that never fail, such as the built-in SQL92 filter. Only these
// are evaluated ahead of pulls.
type PureFilter interface {
	Pure() bool
}

func isPure(f Filter) bool {
	p, ok := f.(PureFilter)
	return ok && p.Pure() && f.NeedsRecord()
}
