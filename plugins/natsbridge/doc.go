// Package natsbridge publishes the broker's retry and dead-letter events to
// NATS — JetStream by default, or core NATS — at least once, and serves
// dead-letter resends over NATS.
//
// It owns the outbox reader and its durable cursor, the subject and header
// mapping, the in-flight window and the resend service. The event and
// dead-letter types are core/outbox's. It reads the broker only through
// the small interfaces it declares (Source, Resender), which the wiring
// (internal/server) adapts the broker and its store to; it does not
// import the broker, and the broker never calls it, so no send, pull or
// retry ever waits on NATS.
//
// # Subjects
//
//	<prefix>.<cluster>.<kind>.<group>.<topic>
//
//	prefix   SubjectPrefix, as configured (default "rmq")
//	cluster  the cluster name, escaped
//	kind     "retry" or "dlq"
//	group    the consumer group without %RETRY% or %DLQ%, escaped
//	topic    the message's original topic, escaped
//
// Every name the broker accepts is its own token: topic and group names
// hold only letters, digits, '%', '|', '_' and '-', and all of them pass
// unchanged (GID_2024, CID_A1, %SYS%g). Any other byte b, which only a
// configured cluster name can hold, is written ~XX with XX its two
// upper-case hex digits: '.' is ~2E, '*' ~2A, '>' ~3E, a space ~20, '~'
// ~7E. EscapeToken does this and UnescapeToken undoes it; so cluster
// "prod.eu" and group GID_2024 give rmq.prod~2Eeu.dlq.GID_2024.<topic>.
// `broker admin bridge subject --group G --topic T` prints the subject a
// running broker uses.
// The raw names are in the headers too.
//
// The resend service listens on <prefix>.<cluster>.ctl.resend; a
// provisioned stream captures <prefix>.<cluster>.retry.> and
// <prefix>.<cluster>.dlq.> only, never the service's subject.
//
// # Headers
//
//	Nats-Msg-Id              <cluster>-<broker>-<epoch>-<outbox offset>
//	Nats-Expected-Stream     the expected stream (JetStream mode)
//	Rmq-Event                retry | dlq
//	Rmq-Event-Time           when the move was stored (RFC 3339, UTC, ms)
//	Rmq-Group                the consumer group
//	Rmq-Topic                the original topic
//	Rmq-Msg-Id               the message id the consumer saw
//	Rmq-Origin-Msg-Id        the id of the first delivery (if known)
//	Rmq-Keys, Rmq-Tags       KEYS and TAGS (if set)
//	Rmq-Queue-Id             queue of the failed delivery (-1: unknown)
//	Rmq-Queue-Offset         its offset in that queue (-1: unknown)
//	Rmq-Reconsume-Times      failed attempts so far
//	Rmq-Max-Reconsume-Times  the limit that applied
//	Rmq-Delay-Level          retry only: the delay level chosen
//	Rmq-Next-Attempt-At      retry only: when the next attempt is due
//	Rmq-Reason               why the message moved
//	Rmq-Body-Truncated       the body's full size, when it was cut
//	Rmq-Body-Missing         "true" when the moved message is gone
//	Rmq-Prop-<name>          each allow-listed user property present
//
// The payload is the message body (decompressed), cut to BodyCap (default
// 256 KiB) and to what the server's max payload leaves after the headers.
// Header values have control characters replaced by spaces.
//
// The epoch is a random number created once per store and kept as a
// durable counter: a store recreated from scratch restarts outbox offsets
// at 0 under a new epoch, so its ids never collide with the old store's
// within the dedupe window. With a Resender it is written as a record
// first, which is durable on every member of a replicated store when
// PutRecord returns, so the bridge of the set's next leader finds the same
// epoch even if the counter had not reached it.
//
// # Replicated sets
//
// On a replicated broker set the wiring (internal/server) runs the bridge
// on the leader only, starting it with the master's broker and shutting
// it down before that broker stops. The cursor, a durable counter in the
// replicated store, reaches the other members with the leader's
// checkpoint; invariants 1 and 3 below make the copy a new leader reads
// never ahead of what was acknowledged, so after a failover it republishes
// at most what was in flight and what was acknowledged since the last
// checkpoint, under the same ids.
//
// # At least once
//
// The outbox is a queue in the broker's store: each retry or dead-letter
// move and its event are written in one append, so an event exists if and
// only if its move happened, and it is as durable as the move. The bridge
// keeps a cursor, a durable counter in the same store, with these
// invariants:
//
//  1. Every outbox event below the cursor was acknowledged (JetStream: a
//     publish ack, new or duplicate; core: a flush round trip after the
//     publish), left out by the filters, or unreadable.
//  2. The cursor moves only over a contiguous run of such events (the
//     window, window.go); an ack for a later event waits for the earlier
//     ones.
//  3. The durable cursor is never ahead of the in-memory one: it is
//     written (with fsync) every CursorInterval and at shutdown, from the
//     in-memory value.
//  4. On any error — a failed or timed-out publish, a negative ack, a read
//     error, a lost connection — the bridge stops publishing, lets the
//     publishes in flight settle (each has a timeout), rewinds to the
//     cursor and, after a backoff, publishes again from there with the
//     same message ids.
//
// So every event at or above the durable cursor is published again after
// any failure or restart, and each is published until acknowledged: none
// is lost unless retention removes it first (counted as expired and
// logged as a range; retention never waits for the bridge). Republished
// events carry the same Nats-Msg-Id, so a stream whose duplicate window
// covers the replay (the time from a first publish to its republish: a
// publish timeout plus a backoff, or a broker restart) stores each event
// once. Core NATS has no deduplication: subscribers may see an event
// twice.
//
// The connection reconnects forever and buffers nothing while
// disconnected (the outbox is the buffer), so a publish during an outage
// fails at once and the bridge waits for the connection.
//
// # Resend over NATS
//
// A request on <prefix>.<cluster>.ctl.resend carries a ResendRequest
// (group, msgId or queueOffset, target, idempotency key) and is answered
// with a ResendReply holding the new message id. It resends through the
// same path as `broker admin dlq resend`. Keys are kept durably in the
// store for ResendKeyTTL (default 24 h):
//
//  1. The key is claimed (written with fsync) before the resend and marked
//     done with the reply after it.
//  2. A request whose key is done gets the first reply again, marked
//     duplicate; one whose key was claimed but never marked done (the
//     broker stopped in between) is refused as interrupted rather than
//     risk a second resend; one whose key was used for a different request
//     is refused.
//  3. A request that finds no dead letter frees its key.
//
// Who may resend is decided by NATS subject permissions.
package natsbridge
