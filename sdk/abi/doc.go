// Package abi is the one definition of the broker's plugin ABI, version 1,
// shared by the guest SDK (package sdk, built for GOOS=wasip1) and the host
// (package plugins/wasm). It holds the export and import names, the byte
// layouts of every call, the status codes and the limits, with an encoder and
// a decoder for each layout. It imports only the standard library and
// compiles for both sides.
//
// # Module shape
//
// A plugin is a WASI reactor module (Go: GOOS=wasip1 GOARCH=wasm go build
// -buildmode=c-shared) that exports:
//
//	+-------------------+----------------------------+---------------------------------+
//	| export            | signature                  | meaning                         |
//	+-------------------+----------------------------+---------------------------------+
//	| memory            | memory                     | linear memory                   |
//	| _initialize       | () → ()                    | runtime and init functions      |
//	| broker_abi_v1     | () → ()                    | ABI marker, never called        |
//	| broker_buffer     | (size i32) → ptr i32       | guest-owned reusable buffer     |
//	| broker_init       | (ptr, len i32) → status    | plugin config, once an instance |
//	| broker_info       | () → i64 (optional)        | PackPtrLen of the info block    |
//	| broker_filter     | (in, len, count, out i32)  | filter batch → status           |
//	| broker_filter_keys| (in, len i32) → i64        | properties an expression reads  |
//	|                   | (optional)                 | (see Property projection)       |
//	| broker_allocate   | (in, len i32) → i64        | PackPtrLen of indices, or       |
//	|                   |                            | −status                         |
//	| broker_txn_check  | (in, len, count, out i32)  | half-message batch → status     |
//	| broker_transform  | (in, len i32) → i64        | one message: 0 pass, PackPtrLen |
//	|                   | (v1.2)                     | of a result, or −status         |
//	| broker_selftest   | () → i64 (optional)        | PackPtrLen of self-test vectors |
//	+-------------------+----------------------------+---------------------------------+
//
// and imports nothing but module broker_v1 (log(level, ptr, len),
// now_ms() → i64) and the wasi_snapshot_preview1 functions the Go runtime
// links.
//
// # Call sequence
//
// The host runs _initialize, asks broker_buffer for room for the config,
// copies it there and calls broker_init, then asks broker_buffer for its
// working size once. Each call copies the input to the start of the buffer
// (in = the buffer) and, for filter and txn batches, places out at
// OutOffset(len) in the same buffer, zeroed. A status other than StatusOK
// leaves an error message at the start of the buffer:
//
//	+------+------------+-----------------------------------+
//	| size | field      | meaning                           |
//	+------+------------+-----------------------------------+
//	|  4   | length n   | ≤ MaxErrorLen                     |
//	|  n   | message    | UTF-8                             |
//	+------+------------+-----------------------------------+
//
// All integers in every layout are little-endian, as wasm loads them.
//
// # Info block
//
//	+------+---------------+-----------------------------------------------+
//	| size | field         | meaning                                       |
//	+------+---------------+-----------------------------------------------+
//	|  2   | ABI version   | 1                                             |
//	|  1   | kinds         | bit 0 filter, bit 1 allocate, bit 2 txncheck, |
//	|      |               | bit 3 (v1.2) transform                        |
//	|  1   | flags         | bit 0: filter batches carry bodies; bit 1     |
//	|      |               | (v1.1): bodies inflated by the host; bit 2    |
//	|      |               | (v1.4): named properties' values resolved     |
//	|  2   | version len v | ≤ 255                                         |
//	|  v   | version       | the plugin's own version label                |
//	|  2   | ABI minor     | Minor when built; absent (read as 0) in the   |
//	|      |               | blocks of guests older than the field         |
//	+------+---------------+-----------------------------------------------+
//
// Readers ignore bytes after the fields they know. A host loads a module
// whose ABI version is its own major with a minor no later than its own
// (package sdk's doc, "ABI versions and compatibility", states the rule).
//
// # Filter batch (broker_filter)
//
// The input is a header and count records, each starting right after the
// previous one:
//
//	+------+--------------+------------------------------------------------+
//	| size | field        | meaning                                        |
//	+------+--------------+------------------------------------------------+
//	|  4   | expr len e   | ≤ MaxExpressionLen                             |
//	|  e   | expression   | the subscription's expression, UTF-8           |
//	+------+--------------+------------------------------------------------+
//
//	+--------+------+-----------------+--------------------------------------+
//	| offset | size | field           | meaning                              |
//	+--------+------+-----------------+--------------------------------------+
//	|    0   |  4   | length n        | the whole record, this field included|
//	|    4   |  4   | queue id        | i32                                  |
//	|    8   |  8   | queue offset    | i64                                  |
//	|   16   |  8   | born timestamp  | i64, ms                              |
//	|   24   |  8   | store timestamp | i64, ms                              |
//	|   32   |  4   | reconsume times | i32                                  |
//	|   36   |  4   | sys flag        | i32, stored SYSFLAG (0x1 compressed) |
//	|   40   |  4   | body len b      | 0xFFFFFFFF when the body is not sent |
//	|   44   |  2   | topic len t     |                                      |
//	|   46   |  2   | tags len g      |                                      |
//	|   48   |  2   | keys len k      |                                      |
//	|   50   |  2   | props len p     |                                      |
//	|   52   |  t   | topic           |                                      |
//	|        |  g   | tags            | the TAGS property                    |
//	|        |  k   | keys            | the KEYS property                    |
//	|        |  p   | properties      | key 0x01 value 0x02 ...              |
//	|        |  b   | body            | only when sent, as stored            |
//	+--------+------+-----------------+--------------------------------------+
//
// Bodies are sent only to modules whose info block sets FlagFilterBody. The
// output is count bytes at out, one per record: FilterNoMatch or FilterMatch.
// A byte left at FilterUnset is an error, never a "no match". A call with
// count 0 only checks the expression.
//
// # Property projection (broker_filter_keys)
//
// Scanning a properties string is the largest cost of a property filter
// inside a guest, so a filter may name the properties an expression reads.
// The input is a filter batch header (the expression) with no records; the
// result is 0 (every property), a negated status, or PackPtrLen of:
//
//	+-------------+----------------------------------------------+
//	| size        | field                                        |
//	+-------------+----------------------------------------------+
//	| 2           | key count n (≤ MaxFilterKeys)                |
//	| n × (2+len) | keys: u16 length, bytes                      |
//	+-------------+----------------------------------------------+
//
// The host then sends, in that expression's batches, only the pieces of
// each properties string whose key (the bytes before the first 0x01) is
// listed, in their order, so a lookup of a listed key reads as it would in
// the whole string. The tags and keys fields still come from the whole
// string. The host asks once per expression and module.
//
// # Resolved values (FlagFilterValues, ABI v1.4)
//
// A module whose info block sets FlagFilterValues gets, in the batches of
// an expression for which broker_filter_keys listed n keys, a properties
// field (props len p) that holds no properties string but the value of
// each listed key, in the order listed:
//
//	+-------------+------------------------------------------------------+
//	| size        | field                                                |
//	+-------------+------------------------------------------------------+
//	| n × (2+len) | value length (u16; ValueAbsent = 0xFFFF: the message |
//	|             | has no such property), then the value's bytes        |
//	+-------------+------------------------------------------------------+
//
// The host resolves each key as the broker's own lookup does: the value of
// the last well-formed pair (exactly one 0x01 in the piece) with that key;
// a key holding 0x01 is always absent, and a key listed twice gets its
// value twice. An empty value is present with length 0. The field is
// bounded by its u16 length as before, so the values of one record fit in
// 65535 bytes with their lengths, or the record is refused, as a too-long
// projected properties field is. Expressions for which broker_filter_keys
// answered 0 carry the whole properties string, and a module without the
// flag gets the layout above unchanged. A host older than v1.4 refuses a
// module of minor 4 by the version rule, so a module that sets the flag
// never meets a host that ignores it.
//
// # Transaction-check batch (broker_txn_check)
//
//	+------+------------+--------------------------------------+
//	| size | field      | meaning                              |
//	+------+------------+--------------------------------------+
//	|  8   | now        | i64, the broker's clock in ms        |
//	+------+------------+--------------------------------------+
//
// then count half messages:
//
//	+--------+------+-----------------+--------------------------------------+
//	| offset | size | field           | meaning                              |
//	+--------+------+-----------------+--------------------------------------+
//	|    0   |  4   | length n        | the whole record, this field included|
//	|    4   |  4   | check times     | i32, checks made so far              |
//	|    8   |  8   | born timestamp  | i64, ms                              |
//	|   16   |  8   | store timestamp | i64, ms                              |
//	|   24   |  2   | group len g     | producer group                       |
//	|   26   |  2   | topic len t     | the real topic                       |
//	|   28   |  2   | msg id len m    | UNIQ_KEY                             |
//	|   30   |  2   | props len p     |                                      |
//	|   32   |  g   | producer group  |                                      |
//	|        |  t   | topic           |                                      |
//	|        |  m   | msg id          |                                      |
//	|        |  p   | properties      | key 0x01 value 0x02 ...              |
//	+--------+------+-----------------+--------------------------------------+
//
// The output is count results of TxnResultLen bytes at out:
//
//	+------+---------+--------------------------------------------------+
//	| size | field   | meaning                                          |
//	+------+---------+--------------------------------------------------+
//	|  4   | action  | TxnCheckNow, TxnWait, TxnCommit, TxnRollback,    |
//	|      |         | TxnDiscard; TxnUnset is an error                 |
//	|  4   | wait    | u32 ms before the next decision (TxnWait)        |
//	+------+---------+--------------------------------------------------+
//
// # Allocation (broker_allocate)
//
//	+-------------+------------------------------------------------+
//	| size        | field                                          |
//	+-------------+------------------------------------------------+
//	| 2+g         | consumer group (u16 length, bytes)             |
//	| 2+c         | current client id                              |
//	| 4           | client count n                                 |
//	| n × (2+len) | client ids, sorted                             |
//	| 4           | queue count q                                  |
//	| q × (4+2+t+2+b) | queue id i32, topic, broker name           |
//	+-------------+------------------------------------------------+
//
// The result is PackPtrLen(ptr, k): k u32 indices into the queue list, the
// queues assigned to the current client; a negative result is −Status.
//
// # Transform (broker_transform, ABI v1.2)
//
// One message before the broker stores it. The input is one record:
//
//	+--------+------+-----------------+--------------------------------------+
//	| offset | size | field           | meaning                              |
//	+--------+------+-----------------+--------------------------------------+
//	|    0   |  4   | sys flag        | u32, 0x1: the body is still zlib     |
//	|        |      |                 | (the host inflates it when it can)   |
//	|    4   |  2   | topic len t     |                                      |
//	|    6   |  2   | zero            |                                      |
//	|    8   |  4   | props len p     |                                      |
//	|   12   |  4   | body len b      |                                      |
//	|   16   |  t   | topic           |                                      |
//	|        |  p   | properties      | key 0x01 value 0x02 ... (TAGS, KEYS) |
//	|        |  b   | body            |                                      |
//	+--------+------+-----------------+--------------------------------------+
//
// The result is 0 to store the message unchanged, a negated status, or
// PackPtrLen of a result that fills exactly its length:
//
//	+------+-------------+------------------------------------------------+
//	| size | field       | meaning                                        |
//	+------+-------------+------------------------------------------------+
//	|  4   | action      | TransformChange or TransformReject             |
//	|  4   | topic len   | 1..MaxTopicLen, or Unchanged (0xFFFFFFFF)      |
//	|  4   | props len   | or Unchanged                                   |
//	|  4   | body len    | or Unchanged; a new body is stored as given,   |
//	|      |             | uncompressed                                   |
//	|  4   | reason len  | ≤ MaxErrorLen: why a reject refuses the send   |
//	|      | bytes       | topic, properties, body, reason, in that order |
//	+------+-------------+------------------------------------------------+
//
// A reject changes nothing (its three lengths are Unchanged).
//
// # Self-test vectors (broker_selftest)
//
//	+------+-----------------+---------------------------------------------+
//	| size | field           | meaning                                     |
//	+------+-----------------+---------------------------------------------+
//	|  4   | vector count    |                                             |
//	|      | per vector:     |                                             |
//	|  1   | kind            | one Kinds bit                               |
//	|  3   | zero            |                                             |
//	|  4   | count           | the call's count argument                   |
//	|  4   | in len i        |                                             |
//	|  4   | out len o       |                                             |
//	|  i   | input           | exactly as the host would pass it           |
//	|  o   | expected output | result bytes, txn results or u32 indices;   |
//	|      |                 | for a transform, an expectation (v1.3)      |
//	+------+-----------------+---------------------------------------------+
//
// A transform vector (ABI v1.3; count 0) holds one transform record as its
// input. Its expected output is not compared byte for byte but read as an
// expectation (TransformExpectation):
//
//	+-------+-------------+-----------------------------------------------+
//	| size  | field       | meaning                                       |
//	+-------+-------------+-----------------------------------------------+
//	| 2     | name len n  |                                               |
//	| n     | name        | names the test in the host's error            |
//	| rest  | result      | nothing: the message must be stored as sent;  |
//	|       |             | a transform result: a change lists what the   |
//	|       |             | message must hold after (Unchanged: as sent), |
//	|       |             | a reject a substring of the reason            |
//	+-------+-------------+-----------------------------------------------+
//
// The host runs the record through broker_transform and compares outcomes:
// the topic and body by bytes, the properties as a set of pairs, a change
// that changes nothing as a pass.
//
// # Invariants
//
//  1. Decoders never read past their input and never allocate for a count
//     the input has not backed with bytes; a guest's output is untrusted.
//  2. A batch holds at most MaxBatchRecords records and MaxBatchBytes input
//     bytes, except that a record larger than MaxBatchBytes travels alone.
//  3. Pointers packed by PackPtrLen are below 2 GiB (the host caps memory at
//     32768 pages), so a packed result is never negative.
//  4. An unwritten output (FilterUnset, TxnUnset) is an error, so a guest
//     that stops early can never turn into "no match" or "commit".
package abi
