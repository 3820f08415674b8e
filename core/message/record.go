package message

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"net/netip"
)

// MagicCode marks a stored-message record (the RocketMQ 4.x value).
const MagicCode uint32 = 0xDAA320A7

// Message sysFlag bits (stored field SYSFLAG and the send header's sysFlag).
const (
	SysFlagCompressed  int32 = 0x1  // body is zlib-compressed, kept as sent
	SysFlagMultiTags   int32 = 0x2  // unused
	SysFlagTxMask      int32 = 0xC  // transaction type bits
	SysFlagTxNotType   int32 = 0x0  // not transactional
	SysFlagTxPrepared  int32 = 0x4  // half message sent by a producer
	SysFlagTxCommit    int32 = 0x8  // committed transactional message
	SysFlagTxRollback  int32 = 0xC  // rolled back
	SysFlagBornHostV6  int32 = 0x10 // BORNHOST holds an IPv6 address
	SysFlagStoreHostV6 int32 = 0x20 // STOREHOST holds an IPv6 address
)

// Limits of the stored layout.
const (
	MaxTopicLen = 127 // TOPIC length is one byte and RocketMQ caps it at 127
	// MinRecordLen is the smallest possible record: IPv4 hosts, no body,
	// an empty topic and no properties.
	MinRecordLen = 4 + 4 + 4 + 4 + 4 + 8 + 8 + 4 + 8 + 8 + 8 + 8 + 4 + 8 + 4 + 1 + 2
)

// Fixed field positions (everything before BORNHOST).
const (
	offTotalSize   = 0
	offMagic       = 4
	offBodyCRC     = 8
	offQueueID     = 12
	offFlag        = 16
	offQueueOffset = 20
	offPhysOffset  = 28
	offSysFlag     = 36
	offBornTime    = 40
	offBornHost    = 48
)

// Errors of this package. All decoding failures wrap ErrMalformed.
var (
	// ErrMalformed is returned for bytes that do not hold the layout they
	// claim to.
	ErrMalformed = errors.New("message: malformed")
	// ErrTopicTooLong is returned when a topic does not fit the stored layout.
	ErrTopicTooLong = errors.New("message: topic longer than 127 bytes")
	// ErrPropertiesTooLong is returned when properties exceed 32767 bytes.
	ErrPropertiesTooLong = errors.New("message: properties longer than 32767 bytes")
)

func malformed(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrMalformed, fmt.Sprintf(format, args...))
}

// Message is a decoded stored-message record. Body and Properties alias the
// bytes it was decoded from unless the caller copies them.
type Message struct {
	BodyCRC                   uint32
	QueueID                   int32
	Flag                      int32
	QueueOffset               int64
	CommitLogOffset           int64
	SysFlag                   int32
	BornTimestamp             int64
	BornHost                  netip.AddrPort
	StoreTimestamp            int64
	StoreHost                 netip.AddrPort
	ReconsumeTimes            int32
	PreparedTransactionOffset int64
	Body                      []byte
	Topic                     string
	Properties                Properties
}

// RecordLen returns the encoded length of m.
func (m *Message) RecordLen() int {
	return MinRecordLen + hostExtra(m.BornHost) + hostExtra(m.StoreHost) +
		len(m.Body) + len(m.Topic) + len(m.Properties)
}

func hostExtra(ap netip.AddrPort) int {
	if isV6(ap) {
		return 12
	}
	return 0
}

func isV6(ap netip.AddrPort) bool {
	a := ap.Addr()
	return a.IsValid() && !a.Is4() && !a.Is4In6()
}

// AppendRecord appends m in the stored layout to dst. BODYCRC is computed
// from the body; the host flags in SYSFLAG are set from the addresses.
func AppendRecord(dst []byte, m *Message) ([]byte, error) {
	if len(m.Topic) > MaxTopicLen {
		return dst, ErrTopicTooLong
	}
	if len(m.Properties) > MaxPropertiesLen {
		return dst, ErrPropertiesTooLong
	}
	n := m.RecordLen()
	sys := m.SysFlag &^ (SysFlagBornHostV6 | SysFlagStoreHostV6)
	if isV6(m.BornHost) {
		sys |= SysFlagBornHostV6
	}
	if isV6(m.StoreHost) {
		sys |= SysFlagStoreHostV6
	}
	be := binary.BigEndian
	dst = be.AppendUint32(dst, uint32(n))
	dst = be.AppendUint32(dst, MagicCode)
	dst = be.AppendUint32(dst, BodyCRC(m.Body))
	dst = be.AppendUint32(dst, uint32(m.QueueID))
	dst = be.AppendUint32(dst, uint32(m.Flag))
	dst = be.AppendUint64(dst, uint64(m.QueueOffset))
	dst = be.AppendUint64(dst, uint64(m.CommitLogOffset))
	dst = be.AppendUint32(dst, uint32(sys))
	dst = be.AppendUint64(dst, uint64(m.BornTimestamp))
	dst = appendHost(dst, m.BornHost)
	dst = be.AppendUint64(dst, uint64(m.StoreTimestamp))
	dst = appendHost(dst, m.StoreHost)
	dst = be.AppendUint32(dst, uint32(m.ReconsumeTimes))
	dst = be.AppendUint64(dst, uint64(m.PreparedTransactionOffset))
	dst = be.AppendUint32(dst, uint32(len(m.Body)))
	dst = append(dst, m.Body...)
	dst = append(dst, byte(len(m.Topic)))
	dst = append(dst, m.Topic...)
	dst = be.AppendUint16(dst, uint16(len(m.Properties)))
	dst = append(dst, m.Properties...)
	return dst, nil
}

func appendHost(dst []byte, ap netip.AddrPort) []byte {
	a := ap.Addr()
	if isV6(ap) {
		b := a.As16()
		dst = append(dst, b[:]...)
	} else {
		var b [4]byte
		if a.IsValid() {
			b = a.Unmap().As4()
		}
		dst = append(dst, b[:]...)
	}
	return binary.BigEndian.AppendUint32(dst, uint32(ap.Port()))
}

// BodyCRC is the BODYCRC value for body: CRC-32 (IEEE) masked to 31 bits, as
// RocketMQ writes it.
func BodyCRC(body []byte) uint32 { return crc32.ChecksumIEEE(body) & 0x7FFFFFFF }

// Record is one stored-message record in its encoded form. Its accessors
// read fields in place; call Validate once before trusting them on bytes
// from outside.
type Record []byte

// RecordSize reads TOTALSIZE from the start of b, or returns -1 if b is too
// short to hold it.
func RecordSize(b []byte) int {
	if len(b) < 4 {
		return -1
	}
	return int(int32(binary.BigEndian.Uint32(b)))
}

// Validate checks that r is exactly one well-formed record: TOTALSIZE equals
// len(r), the magic code matches, and every variable-length field fits.
// It does not check BODYCRC (see CheckBodyCRC).
func (r Record) Validate() error {
	if len(r) < MinRecordLen {
		return malformed("record of %d bytes is shorter than the minimum %d", len(r), MinRecordLen)
	}
	if size := RecordSize(r); size != len(r) {
		return malformed("TOTALSIZE %d does not match the record length %d", size, len(r))
	}
	if m := binary.BigEndian.Uint32(r[offMagic:]); m != MagicCode {
		return malformed("magic code %#x", m)
	}
	bodyAt := r.bodyLenAt()
	if bodyAt+4 > len(r) {
		return malformed("hosts run past the record end")
	}
	bodyLen := int(int32(binary.BigEndian.Uint32(r[bodyAt:])))
	if bodyLen < 0 || bodyAt+4+bodyLen+1 > len(r) {
		return malformed("body length %d runs past the record end", bodyLen)
	}
	topicAt := bodyAt + 4 + bodyLen
	topicLen := int(r[topicAt])
	if topicLen > MaxTopicLen {
		return malformed("topic length %d", topicLen)
	}
	propsAt := topicAt + 1 + topicLen
	if propsAt+2 > len(r) {
		return malformed("topic runs past the record end")
	}
	propsLen := int(int16(binary.BigEndian.Uint16(r[propsAt:])))
	if propsLen < 0 || propsAt+2+propsLen != len(r) {
		return malformed("properties length %d does not end the record", propsLen)
	}
	return nil
}

// CheckBodyCRC reports whether BODYCRC matches the body.
func (r Record) CheckBodyCRC() bool { return r.BodyCRC() == BodyCRC(r.Body()) }

func (r Record) u32(at int) uint32 { return binary.BigEndian.Uint32(r[at:]) }
func (r Record) u64(at int) uint64 { return binary.BigEndian.Uint64(r[at:]) }

// Size returns TOTALSIZE.
func (r Record) Size() int { return int(int32(r.u32(offTotalSize))) }

// BodyCRC returns the stored BODYCRC.
func (r Record) BodyCRC() uint32 { return r.u32(offBodyCRC) }

// QueueID returns QUEUEID.
func (r Record) QueueID() int32 { return int32(r.u32(offQueueID)) }

// Flag returns FLAG.
func (r Record) Flag() int32 { return int32(r.u32(offFlag)) }

// QueueOffset returns QUEUEOFFSET.
func (r Record) QueueOffset() int64 { return int64(r.u64(offQueueOffset)) }

// CommitLogOffset returns PHYSICALOFFSET.
func (r Record) CommitLogOffset() int64 { return int64(r.u64(offPhysOffset)) }

// SysFlag returns SYSFLAG.
func (r Record) SysFlag() int32 { return int32(r.u32(offSysFlag)) }

// BornTimestamp returns BORNTIMESTAMP.
func (r Record) BornTimestamp() int64 { return int64(r.u64(offBornTime)) }

func (r Record) storeTimeAt() int {
	if r.SysFlag()&SysFlagBornHostV6 != 0 {
		return offBornHost + 20
	}
	return offBornHost + 8
}

func (r Record) storeHostAt() int { return r.storeTimeAt() + 8 }

func (r Record) reconsumeAt() int {
	if r.SysFlag()&SysFlagStoreHostV6 != 0 {
		return r.storeHostAt() + 20
	}
	return r.storeHostAt() + 8
}

func (r Record) bodyLenAt() int { return r.reconsumeAt() + 4 + 8 }

// StoreTimestamp returns STORETIMESTAMP.
func (r Record) StoreTimestamp() int64 { return int64(r.u64(r.storeTimeAt())) }

// BornHost returns BORNHOST.
func (r Record) BornHost() netip.AddrPort {
	return readHost(r[offBornHost:], r.SysFlag()&SysFlagBornHostV6 != 0)
}

// StoreHost returns STOREHOST.
func (r Record) StoreHost() netip.AddrPort {
	return readHost(r[r.storeHostAt():], r.SysFlag()&SysFlagStoreHostV6 != 0)
}

func readHost(b []byte, v6 bool) netip.AddrPort {
	if v6 {
		return netip.AddrPortFrom(netip.AddrFrom16([16]byte(b[:16])), uint16(binary.BigEndian.Uint32(b[16:])))
	}
	return netip.AddrPortFrom(netip.AddrFrom4([4]byte(b[:4])), uint16(binary.BigEndian.Uint32(b[4:])))
}

// ReconsumeTimes returns RECONSUMETIMES.
func (r Record) ReconsumeTimes() int32 { return int32(r.u32(r.reconsumeAt())) }

// PreparedTransactionOffset returns PREPAREDTXOFF.
func (r Record) PreparedTransactionOffset() int64 { return int64(r.u64(r.reconsumeAt() + 4)) }

// Body returns the body as stored (still compressed if SysFlagCompressed).
func (r Record) Body() []byte {
	at := r.bodyLenAt()
	n := int(r.u32(at))
	return r[at+4 : at+4+n]
}

func (r Record) topicAt() int {
	at := r.bodyLenAt()
	return at + 4 + int(r.u32(at))
}

// Topic returns TOPIC without copying.
func (r Record) Topic() []byte {
	at := r.topicAt()
	return r[at+1 : at+1+int(r[at])]
}

// Properties returns PROPERTIES without copying.
func (r Record) Properties() Properties {
	at := r.topicAt()
	at += 1 + int(r[at])
	n := int(binary.BigEndian.Uint16(r[at:]))
	return Properties(r[at+2 : at+2+n])
}

// SetQueueOffset overwrites QUEUEOFFSET in place.
func (r Record) SetQueueOffset(v int64) { binary.BigEndian.PutUint64(r[offQueueOffset:], uint64(v)) }

// SetCommitLogOffset overwrites PHYSICALOFFSET in place.
func (r Record) SetCommitLogOffset(v int64) { binary.BigEndian.PutUint64(r[offPhysOffset:], uint64(v)) }

// SetStoreTimestamp overwrites STORETIMESTAMP in place.
func (r Record) SetStoreTimestamp(v int64) {
	binary.BigEndian.PutUint64(r[r.storeTimeAt():], uint64(v))
}

// SetQueueID overwrites QUEUEID in place.
func (r Record) SetQueueID(v int32) { binary.BigEndian.PutUint32(r[offQueueID:], uint32(v)) }

// Decode fills m from r, which must have passed Validate. Body and
// Properties alias r.
func (r Record) Decode(m *Message) {
	*m = Message{
		BodyCRC:                   r.BodyCRC(),
		QueueID:                   r.QueueID(),
		Flag:                      r.Flag(),
		QueueOffset:               r.QueueOffset(),
		CommitLogOffset:           r.CommitLogOffset(),
		SysFlag:                   r.SysFlag(),
		BornTimestamp:             r.BornTimestamp(),
		BornHost:                  r.BornHost(),
		StoreTimestamp:            r.StoreTimestamp(),
		StoreHost:                 r.StoreHost(),
		ReconsumeTimes:            r.ReconsumeTimes(),
		PreparedTransactionOffset: r.PreparedTransactionOffset(),
		Body:                      r.Body(),
		Topic:                     string(r.Topic()),
		Properties:                r.Properties(),
	}
}

// DecodeRecords splits buf, a plain run of records such as a PULL_MESSAGE
// body, validating each one.
func DecodeRecords(buf []byte) ([]Record, error) {
	var out []Record
	for off := 0; off < len(buf); {
		size := RecordSize(buf[off:])
		if size < MinRecordLen || size > len(buf)-off {
			return out, malformed("record at byte %d: size %d with %d bytes left", off, size, len(buf)-off)
		}
		r := Record(buf[off : off+size])
		if err := r.Validate(); err != nil {
			return out, fmt.Errorf("record at byte %d: %w", off, err)
		}
		out = append(out, r)
		off += size
	}
	return out, nil
}
