// Package message owns the RocketMQ message formats that cross the wire and
// land on disk: the properties string, the stored-message record (which is
// also the PULL_MESSAGE body), the SEND_BATCH_MESSAGE body, message ids and
// the tag hash.
//
// It imports no other package of this module but the leaf
// internal/properties, which holds the properties codec; every other package
// builds on it.
//
// # Properties string
//
// A message's properties travel as one string of pairs, each written as
//
//	key 0x01 value 0x02
//
// The trailing 0x02 is written after every pair, the last one included. A
// piece that does not split into exactly one key and one value is ignored when
// reading. The whole string is at most 32767 bytes, because the stored layout
// keeps its length in an int16. [Properties] and [EncodeProperties] are this
// package's face of the codec in internal/properties. The sdk (a module of
// its own) reads with a copy that a differential test holds to the codec, so
// the broker and WASM guests read the same bytes the same way.
//
// # Stored-message record
//
// All integers are big-endian. The layout is fixed by the RocketMQ 4.x
// clients, which walk it field by field and do not skip by TOTALSIZE, so a
// record carries exactly these fields:
//
//	+------+----------------+--------------------------------------------------+
//	| size | field          | meaning                                          |
//	+------+----------------+--------------------------------------------------+
//	|  4   | TOTALSIZE      | length of the whole record, this field included  |
//	|  4   | MAGICCODE      | 0xDAA320A7                                       |
//	|  4   | BODYCRC        | CRC-32 (IEEE) of the body, masked & 0x7FFFFFFF   |
//	|  4   | QUEUEID        | queue id within the topic                        |
//	|  4   | FLAG           | user flag                                        |
//	|  8   | QUEUEOFFSET    | logical offset in the consume queue              |
//	|  8   | PHYSICALOFFSET | commit-log offset of this record                 |
//	|  4   | SYSFLAG        | SysFlag* bits                                    |
//	|  8   | BORNTIMESTAMP  | producer clock, ms                               |
//	| 8/20 | BORNHOST       | IPv4 (4) or IPv6 (16, SysFlagBornHostV6) + port  |
//	|  8   | STORETIMESTAMP | broker clock when stored, ms                     |
//	| 8/20 | STOREHOST      | IPv4 or IPv6 (SysFlagStoreHostV6) + port         |
//	|  4   | RECONSUMETIMES | delivery attempts so far                         |
//	|  8   | PREPAREDTXOFF  | half-message commit-log offset, else 0           |
//	| 4+n  | BODY           | int32 length, then the body as sent              |
//	| 1+t  | TOPIC          | uint8 length (≤ 127), then the topic             |
//	| 2+p  | PROPERTIES     | int16 length, then the properties string         |
//	+------+----------------+--------------------------------------------------+
//
// # Batch body
//
// A SEND_BATCH_MESSAGE body is a plain run of entries:
//
//	+------+------------+--------------------------------------------+
//	| size | field      | meaning                                    |
//	+------+------------+--------------------------------------------+
//	|  4   | TOTALSIZE  | 20 + bodyLen + 2 + propsLen                |
//	|  4   | MAGICCODE  | ignored (the Go client writes 0)           |
//	|  4   | BODYCRC    | ignored (recomputed when stored)           |
//	|  4   | FLAG       | user flag of this message                  |
//	| 4+n  | BODY       | int32 length, then the body                |
//	| 2+p  | PROPERTIES | int16 length, then the properties string   |
//	+------+------------+--------------------------------------------+
//
// # Message ids
//
// An offsetMsgId is the uppercase hex of the store host's address bytes, its
// port as an int32 and the record's commit-log offset as an int64: 32 hex
// characters for IPv4, 56 for IPv6. A client message id (property UNIQ_KEY) is
// opaque to the broker; [NewUniqID] mints one, in the clients' layout and
// uppercase hex, for the messages the broker creates itself and those the
// client package sends.
//
// # Invariants
//
//  1. A [Record] that passed [Record.Validate] has every field inside its
//     bytes; accessors never read past TOTALSIZE.
//  2. Decoders never panic and never allocate in proportion to a length field
//     that the input has not backed with bytes.
//  3. Encoders reject what the layout cannot hold (topic > 127 bytes,
//     properties > 32767 bytes) instead of truncating.
package message
