// Package remoting owns the RocketMQ 4.x "remoting" protocol: the frame
// codec with both header serializations (JSON and ROCKETMQ binary),
// [Command], the request and response code tables, a TCP [Server] that runs
// handlers per request code, and a [Client] that matches responses to
// requests by opaque and serves requests that servers send back.
//
// It also declares what the broker, the name server and the client say to
// each other over it, so each is declared once: the JSON bodies (topic
// configs, routes, registrations, heartbeats, lock batches; bodies.go,
// decoded leniently by lenient.go),
// the queue-keyed offset tables RocketMQ writes the fastjson way
// (queuetable.go), the
// topic permission bits and reserved topic names, and the send header
// ([SendHeader]). It holds no state about topics, stores or routes; the
// broker and the name server register handlers on a Server. It imports
// only core/message and the standard library.
//
// # Frame
//
// All integers are big-endian.
//
//	+------+-----------+---------------------------------------------------+
//	| size | field     | meaning                                           |
//	+------+-----------+---------------------------------------------------+
//	|  4   | length    | bytes after this field: 4 + headerLen + bodyLen   |
//	|  1   | type      | header serialization: 0 JSON, 1 ROCKETMQ          |
//	|  3   | headerLen | header length, 24-bit unsigned                    |
//	|  h   | header    | the header in that serialization                  |
//	|  n   | body      | raw bytes, possibly empty                         |
//	+------+-----------+---------------------------------------------------+
//
// [ReadFrame] returns everything after the length field; [DecodeFrame] takes
// that; [AppendFrame] writes the whole frame.
//
// # JSON header (type 0)
//
// One object. Clients send the keys in this order, which is also the order
// this package writes them:
//
//	{"code":34,"language":"GO","version":317,"opaque":1,"flag":0,"remark":"","extFields":{}}
//
//	+-----------+----------------------+-----------------------------------+
//	| key       | JSON type            | meaning                           |
//	+-----------+----------------------+-----------------------------------+
//	| code      | integer (int16)      | request or response code          |
//	| language  | string               | sender's language, e.g. "GO"      |
//	| version   | integer (int16)      | sender's RocketMQ version ordinal |
//	| opaque    | integer (int32)      | request id, echoed by responses   |
//	| flag      | integer (int32)      | bit 0 response, bit 1 oneway      |
//	| remark    | string or null       | error text in responses           |
//	| extFields | object or null       | per-code header, string → string  |
//	+-----------+----------------------+-----------------------------------+
//
// Reading follows encoding/json into a struct of those types: keys match
// case-insensitively, unknown keys are skipped, null leaves a field empty,
// a repeated extFields object adds to the earlier one. The Go client fails
// to decode a whole frame when an extFields value is not a string, so every
// value is written as a JSON string; on reading, numbers and booleans are
// accepted and kept as their literal text, since the C++ client writes its
// int header fields (queueId, sysFlag, maxMsgNums, ...) as JSON numbers.
// The Java client adds "serializeTypeCurrentRPC" and leaves out a null
// remark or extFields; the C++ client ends the header with a newline.
// Unknown keys and surrounding white space are skipped.
//
// # Client bodies
//
// The official clients disagree on some JSON bodies. The Java client
// (fastjson) writes SubscriptionData.codeSet as numbers and subVersion as a
// number; the Go client writes codeSet as strings and the message model as
// "Clustering"; the C++ client (jsoncpp, also under the Python and Node
// 4.x clients) writes subVersion as a string, a consumer's consumeType,
// messageModel and consumeFromWhere as numbers (its enums' ordinals,
// which follow Java's order), and leaves out fields it has no value for. The rule: a body type keeps plain Go field types, and its
// UnmarshalJSON (lenient.go, the one place) accepts every client's shape:
// numbers or strings where clients differ, booleans as text, null as
// absent, unknown fields skipped (Java 5.x's heartbeatFingerprint,
// withoutSub). What no client sends is still an error that names the
// field.
//
// testdata/clients holds request frames, header and body, exactly as each
// client family writes them (java, go, cpp; one txtar file per request
// code, its comment naming the client class the shape comes from; read by
// internal/clientframes). TestClientCorpusDecodes decodes each through the
// readers the handlers use and fails for a file no handler decodes;
// FuzzClientFrames grows inputs from them; core/broker replays them
// against a running broker. A shape a new client version writes belongs
// there first.
//
// # ROCKETMQ header (type 1)
//
//	+------+-----------+---------------------------------------------------+
//	| size | field     | meaning                                           |
//	+------+-----------+---------------------------------------------------+
//	|  2   | code      | int16                                             |
//	|  1   | language  | JAVA 0, CPP 1, DOTNET 2, PYTHON 3, DELPHI 4,      |
//	|      |           | ERLANG 5, RUBY 6, OTHER 7, HTTP 8, GO 9, PHP 10,  |
//	|      |           | OMS 11, RUST 12                                   |
//	|  2   | version   | int16                                             |
//	|  4   | opaque    | int32                                             |
//	|  4   | flag      | int32                                             |
//	|  4   | remarkLen | int32 R ≥ 0                                       |
//	|  R   | remark    | UTF-8 text                                        |
//	|  4   | extLen    | int32 E ≥ 0, the size of the entries that follow  |
//	|  E   | entries   | repeated: int16 key length, key, int32 value      |
//	|      |           | length, value                                     |
//	+------+-----------+---------------------------------------------------+
//
// The header must be used up exactly. A language name without a code is
// written as OTHER.
//
// # Which serialization
//
// The Go client always sends JSON and reads both. A response goes out in
// the serialization of its request. Requests the broker starts
// ([Conn.Request], [Conn.Oneway]) go out in JSON. [Client.Invoke] uses
// the request's SerializeType.
//
// # Connections
//
// Each connection has one reader goroutine, handler goroutines, and one
// writer goroutine, all owned by the goroutine that serves the connection:
//
//   - The reader decodes frames one after another. A response is handed to
//     the call waiting for its opaque, or to its callback for
//     [Client.InvokeAsync], which runs on the reader; a request is handed to a handler
//     goroutine (idle ones are reused, so their grown stacks are too). When
//     MaxInflightPerConn handlers are running, the reader waits.
//   - Handlers run concurrently and answer in any order; a handler may keep
//     a request and answer later with [Conn.Reply].
//   - Senders encode their frame into the connection's send queue under its
//     lock; the writer takes everything queued at once and writes it with
//     one vectored write, yielding once first so that frames about to be
//     queued join the same write. Bodies above 64 KiB are written from the
//     sender's slice instead of being copied. A command's ReleaseBody hears
//     when the connection is done with its body (copied, written, or not
//     sent), so a sender can reuse it: the broker pools its pull bodies.
//
// A Client's calls wait in one of two ways. [Client.Invoke] blocks its
// goroutine until the response, ctx's end or the connection's loss.
// [Client.InvokeAsync] returns once the request is queued and calls back
// with the response, or with an error after its timeout (a timer per call),
// when its context ends or when the connection closes; a caller keeping
// many requests in flight then spends no goroutine, and no wake-up of one,
// per request. A JSON
// response a Client reads keeps its extFields as pairs until they are read
// (see Command.ExtFields), as a request for a FastHandler does, since most
// responses are read for a field or two. Its body is copied out of the
// reader's buffer, a large one (4 KiB to 4 MiB) into a pooled buffer that
// [Command.Recycle] gives back once the caller is done with it: a consumer
// pulling backlog then reuses a few buffers instead of making a new one,
// and garbage, per pull.
//
// A malformed or oversize frame closes its connection only, logged with the
// peer's address. A handler panic is recovered, logged, and answered with
// SystemError. A response that cannot be sent (over MaxFrameSize, or a
// header over [MaxHeaderSize]) is answered with [ResponseNotEncodable].
//
// Every request a Server's handler refuses (SYSTEM_ERROR, SYSTEM_BUSY,
// REQUEST_CODE_NOT_SUPPORTED, MESSAGE_ILLEGAL, NO_PERMISSION,
// TOPIC_NOT_EXIST, the SUBSCRIPTION_* codes and the like) is logged with
// the request code, the peer and the remark: "request refused", at Warn
// for SYSTEM_ERROR and Info for the others, at most once per 10 s for
// each pair of request and response codes. Refusals by the Authorize
// hook are the hook's to log.
//
// # Authorization
//
// ServerOptions.Authorize is the one place a Server asks whether a request
// may be served: it is called for every request, before the handler and
// before an unknown code is answered, and a non-nil result is sent as the
// response instead of running the handler (NoPermission with the reason,
// typically; the connection stays open). This package does not know what
// is allowed: the broker and the name server pass a hook built over
// core/acl.
//
// # TLS
//
// A Server with ServerOptions.TLS speaks TLS; with TLSPermissive it serves
// TLS and plain connections on one port, for migrations, as RocketMQ's
// permissive mode does. The first byte tells them apart: 0x16 opens a TLS
// handshake record, and a frame starting with it would announce over
// 369 MB, more than any frame limit. So:
//
//	+-------------------+-------------------+-------------------------------+
//	| server            | first byte 0x16   | any other first byte          |
//	+-------------------+-------------------+-------------------------------+
//	| plain (TLS nil)   | TLS alert, closed | served                        |
//	| TLS only          | handshake, served | closed                        |
//	| TLS permissive    | handshake, served | served plain                  |
//	+-------------------+-------------------+-------------------------------+
//
// Each refusal is logged at a bounded rate ("TLS client on a plain port",
// "plain client on a TLS-only port") and leaves the server unaffected. The
// first byte and the handshake must arrive within FrameReadTimeout of the
// accept, and run on the connection's goroutine, not the accept loop's; a
// connection in its handshake counts toward MaxConns and MaxConnsPerAddr.
// ClientOptions.TLS makes a Client dial TLS, the handshake bounded by
// DialTimeout.
//
// # Limits
//
// A Server protects itself from peers that are slow, silent or many
// (ServerOptions; zero means the default):
//
//	+-----------------------+---------+-------------------------------------+
//	| option                | default | when reached                        |
//	+-----------------------+---------+-------------------------------------+
//	| MaxConns              | 10,000* | new connection closed on accept     |
//	| MaxConnsPerAddr       | 1,000   | same, per source IP                 |
//	| IdleTimeout           | 120 s   | connection with no frame closed     |
//	| FrameReadTimeout      | 10 s    | frame not whole by then: closed     |
//	| MaxFrameSize          | 16 MiB  | frame refused, connection closed;   |
//	|                       |         | response replaced by an error       |
//	| MaxInflightPerConn    | 4,096   | reader waits for a handler          |
//	| MaxQueuedBytesPerConn | 64 MiB  | handlers wait to queue; the reader  |
//	|                       |         | starts no handler until it drains;  |
//	|                       |         | ReserveResponse grants less         |
//	| MaxQueuedBytes        | 256 MiB | all connections: ReserveResponse    |
//	|                       |         | grants less                         |
//	| MaxPartialFrameBytes  | 64 MiB  | frames still arriving, all          |
//	|                       |         | connections: readers wait; the      |
//	|                       |         | largest frame stalled 1 s is        |
//	|                       |         | dropped with its connection         |
//	| WriteTimeout          | 30 s    | connection closed                   |
//	+-----------------------+---------+-------------------------------------+
//	* or three quarters of the open file limit, if lower
//
// The two budgets over all connections bound what a Server holds for its
// peers whatever their number. A frame not yet buffered whole is read in
// 64 KiB chunks, each counted as it arrives, so a peer stalled in a 16 MiB
// frame holds what it sent and not the frame's size; no reader keeps a
// frame buffer over 64 KiB between frames. A handler about to build a
// large response asks Conn.ReserveResponse for room and builds no more
// than it got; the reservation passes to the response
// (Command.Reservation) and ends when the response is queued. Server.Stats
// reports both.
//
// Each limit hit is logged at most once per 10 s per kind, with how many
// were not logged since. A Client's connections have no read deadlines and
// never pause reading, so two ends of this package cannot wait on each
// other; their send queue has the same 64 MiB bound.
//
// Lock order: Server.mu, then Conn.out. Conn.pending and Client.mu are
// never held with another lock; nor is the rate-limited limit log's.
//
// # Closing
//
// Server.Shutdown and Client.Close may be called more than once, and so may
// Conn.Close: a connection may close by itself at any moment (the peer, a
// failed write), so its owner cannot know whether closing it again is a
// mistake, and a shared client may be closed by each of its owners.
//
// # Invariants
//
//  1. Every frame is written whole and in the order its sender queued it;
//     frames from different senders never interleave.
//  2. A response carries its request's opaque, FlagResponse and
//     serialization, whoever built it.
//  3. Every JSON header this package writes has only string extFields
//     values and is read by encoding/json as the Command it was written
//     from (invalid UTF-8 aside, which becomes U+FFFD, as encoding/json
//     writes it).
//  4. Decoders never panic and never allocate in proportion to a length the
//     input has not backed with bytes; a frame is allocated only up to the
//     configured maximum.
//  5. A decoded Command shares no bytes with the frame except Body, and the
//     server's reader gives each request a Body of its own.
//  6. A call waiting for a response ends exactly once: with its response,
//     with ctx's error (InvokeAsync: or its timeout's), or with ErrClosed
//     when its connection goes. For Invoke, a response delivered at the
//     same moment wins; for InvokeAsync, whichever of the response, the
//     timer, the context and the closing takes the call out of the
//     connection's pending table (under its lock) completes it, and
//     nothing else does.
//  7. OnClose runs once per connection, after the connection is closed and
//     its handlers have returned.
//  8. Every goroutine is started and waited for by an owner: Serve's
//     accept loop and each connection's serving goroutine by the Server,
//     each connection's by the Client, the reader's handlers and writer by
//     the connection's serving goroutine.
//  9. A Server connection holds at most MaxQueuedBytesPerConn of
//     unwritten responses plus one frame; bytes handed to a write count
//     until the write returns. While it is at the bound, no new handler
//     starts for it: the peer's requests wait in the socket.
//  10. A Server never writes a frame longer than its MaxFrameSize: a
//     larger response is replaced by ResponseNotEncodable, and the
//     connection stays open.
//  11. A Server connection is closed when no frame starts within
//     IdleTimeout or a started frame is not whole within FrameReadTimeout.
//  12. With an Authorize hook, no handler runs for a request the hook
//     answered.
//  13. A TLS-only Server reads no frame from a connection that has not
//     completed a TLS handshake, and no server reads a TLS handshake as
//     a frame.
package remoting
