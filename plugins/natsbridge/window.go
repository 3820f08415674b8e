package natsbridge

import "github.com/nats-io/nats.go"

// Slot states.
const (
	slotFree   uint8 = iota // outside [cursor, next)
	slotSent                // published; its outcome is awaited
	slotDone                // acknowledged (or a duplicate), or left out
	slotFailed              // its publish failed; a rewind will resend it
)

// slot is one outbox position in the window.
type slot struct {
	off   int64
	state uint8
	msg   *nats.Msg // the message published for off, to match its outcome
	ms    int64     // the event's time (Unix ms), for the lag
}

// window is the span [cursor, next) of the outbox that has been read but
// that the cursor has not passed, kept in a ring of slots indexed by
// offset. Invariants:
//
//  1. cursor <= next <= cursor + len(slots).
//  2. Every event below cursor was acknowledged or deliberately left out.
//  3. sent counts the slots in slotSent.
//
// The cursor moves only over a contiguous run of done slots (advance), so
// an acknowledgement that arrives out of order waits for the ones before
// it.
type window struct {
	slots  []slot
	cursor int64
	next   int64
	sent   int
}

func newWindow(size int, at int64) window {
	return window{slots: make([]slot, size), cursor: at, next: at}
}

func (w *window) at(off int64) *slot { return &w.slots[off%int64(len(w.slots))] }

// room is how many more positions may be read.
func (w *window) room() int { return len(w.slots) - int(w.next-w.cursor) }

// empty reports whether every read position was passed by the cursor.
func (w *window) empty() bool { return w.cursor == w.next }

// push takes position next.
func (w *window) push(state uint8, msg *nats.Msg, ms int64) {
	if w.room() == 0 {
		panic("natsbridge: window overflow")
	}
	*w.at(w.next) = slot{off: w.next, state: state, msg: msg, ms: ms}
	if state == slotSent {
		w.sent++
	}
	w.next++
}

// live returns the slot of off if off is in the window.
func (w *window) live(off int64) *slot {
	if off < w.cursor || off >= w.next {
		return nil
	}
	if s := w.at(off); s.off == off {
		return s
	}
	return nil
}

// ack marks off acknowledged and reports whether that changed anything.
// Any publish of off may acknowledge it, even one from before a rewind:
// the message id is the same, so the stream holds the event either way.
func (w *window) ack(off int64) bool {
	s := w.live(off)
	if s == nil || (s.state != slotSent && s.state != slotFailed) {
		return false
	}
	if s.state == slotSent {
		w.sent--
	}
	s.state, s.msg = slotDone, nil
	return true
}

// fail marks off failed if msg is its latest publish, and reports whether
// it did. An error for an older publish says nothing about the newer one.
func (w *window) fail(off int64, msg *nats.Msg) bool {
	s := w.live(off)
	if s == nil || s.state != slotSent || s.msg != msg {
		return false
	}
	w.sent--
	s.state = slotFailed
	return true
}

// ackSent marks every sent slot acknowledged (core mode, after a flush)
// and returns how many there were.
func (w *window) ackSent() int {
	n := 0
	for off := w.cursor; off < w.next; off++ {
		if s := w.at(off); s.state == slotSent {
			s.state, s.msg = slotDone, nil
			n++
		}
	}
	w.sent = 0
	return n
}

// advance moves the cursor over the done slots at its head.
func (w *window) advance() {
	for w.cursor < w.next {
		s := w.at(w.cursor)
		if s.state != slotDone {
			return
		}
		*s = slot{}
		w.cursor++
	}
}

// cursorMS is the time of the event at the cursor, or 0 if unknown.
func (w *window) cursorMS() int64 {
	if w.cursor < w.next {
		return w.at(w.cursor).ms
	}
	return 0
}

// rewind forgets every position past the cursor so that reading starts
// again there.
func (w *window) rewind() {
	for off := w.cursor; off < w.next; off++ {
		*w.at(off) = slot{}
	}
	w.next, w.sent = w.cursor, 0
}

// reset moves an empty window to off.
func (w *window) reset(off int64) {
	if !w.empty() {
		panic("natsbridge: reset of a window in use")
	}
	w.cursor, w.next = off, off
}
