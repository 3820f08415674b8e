package natsbridge

import (
	"time"
)

// Status is a snapshot of the bridge, as `broker admin bridge status`
// shows it.
type Status struct {
	// Connection is the NATS connection's state: CONNECTED, RECONNECTING,
	// CONNECTING, CLOSED, …
	Connection string `json:"connection"`
	// URL is the server connected to, credentials removed.
	URL string `json:"url,omitempty"`
	// Mode and Stream are the publishing mode and expected stream.
	Mode   Mode   `json:"mode"`
	Stream string `json:"stream,omitempty"`
	// BackingOff is true while the bridge waits to retry after an error.
	BackingOff bool `json:"backingOff"`
	// Cursor is the first outbox offset not yet acknowledged; Head is the
	// next offset the outbox will write.
	Cursor int64 `json:"cursor"`
	Head   int64 `json:"head"`
	// LagEvents is Head - Cursor; LagSeconds is the age of the event at
	// the cursor, zero when nothing lags.
	LagEvents  int64   `json:"lagEvents"`
	LagSeconds float64 `json:"lagSeconds"`
	// InFlight counts publishes awaiting their acknowledgement.
	InFlight int64 `json:"inFlight"`
	// Published counts events acknowledged as new, Duplicates those the
	// stream already held (republished after an error or a restart).
	Published  int64 `json:"published"`
	Duplicates int64 `json:"duplicates"`
	// Expired counts events retention removed before they were
	// acknowledged; Filtered those the config leaves out; Unreadable those
	// the outbox could not decode.
	Expired    int64 `json:"expired"`
	Filtered   int64 `json:"filtered"`
	Unreadable int64 `json:"unreadable"`
	// Failures counts the times publishing stopped and rewound.
	Failures int64 `json:"failures"`
	// UnreachableSince is when the connection to NATS was lost; zero
	// while connected.
	UnreachableSince time.Time `json:"unreachableSince,omitzero"`
	// LastError is the latest publishing error and when it happened.
	// During an outage it says so: "NATS unreachable since …, N events
	// waiting".
	LastError   string    `json:"lastError,omitempty"`
	LastErrorAt time.Time `json:"lastErrorAt,omitzero"`
	// Epoch is this store's part of the message ids.
	Epoch string `json:"epoch"`
	// Resends counts dead letters resent over NATS.
	Resends int64 `json:"resends"`
}

// Status returns a snapshot of the bridge. It is safe to call at any time
// after Start; after Shutdown it reports the last figures.
func (b *Bridge) Status() Status {
	s := Status{
		Mode:       b.opts.Mode,
		Stream:     b.opts.Stream,
		BackingOff: b.st.backingOff.Load(),
		Cursor:     b.st.cursor.Load(),
		Head:       b.st.head.Load(),
		InFlight:   b.st.inFlight.Load(),
		Published:  b.st.published.Load(),
		Duplicates: b.st.duplicates.Load(),
		Expired:    b.st.expired.Load(),
		Filtered:   b.st.filtered.Load(),
		Unreadable: b.st.unreadable.Load(),
		Failures:   b.st.failures.Load(),
		Epoch:      b.epoch,
	}
	if b.nc != nil {
		s.Connection = b.nc.Status().String()
		if b.nc.IsConnected() {
			s.URL = b.nc.ConnectedUrlRedacted()
		}
	}
	// Once stopped, the source may be closed: report the last figures.
	live := !b.st.stopped.Load()
	if live {
		if _, head := b.src.EventOffsets(); head > s.Head {
			s.Head = head
		}
	}
	if n := b.st.lastErr.Load(); n != nil && !n.down {
		s.LastError, s.LastErrorAt = n.msg, n.at
	}
	if b.resend != nil {
		s.Resends = b.resend.count.Load()
	}
	s.LagEvents = max(s.Head-s.Cursor, 0)
	if since, down := b.unreachableSince(); down && live {
		s.UnreachableSince = since
		s.LastError, s.LastErrorAt = unreachableNote(since, s.LagEvents), since
	} else if n := b.st.lastErr.Load(); n != nil && n.down {
		// The outage is over; say what it was.
		s.LastError, s.LastErrorAt = "NATS was unreachable; reconnected", n.at
	}
	if s.LagEvents > 0 {
		ms := b.st.cursorMS.Load()
		if ms == 0 && live {
			if evs, err := b.src.ReadEvents(s.Cursor, 1, nil); err == nil && len(evs) == 1 {
				ms = evs[0].Time.UnixMilli()
			}
		}
		if ms > 0 {
			s.LagSeconds = max(b.opts.Now().Sub(time.UnixMilli(ms)).Seconds(), 0)
		}
	}
	return s
}
