package abi

// TxnHeaderLen is the size of a transaction-check batch header.
const TxnHeaderLen = 8

// TxnRecordHeaderLen is the fixed part of a half-message record.
const TxnRecordHeaderLen = 32

// Offsets inside a half-message record.
const (
	hmLen            = 0  // u32 record length, this field included
	hmCheckTimes     = 4  // i32 checks made so far
	hmBornTimestamp  = 8  // i64, ms
	hmStoreTimestamp = 16 // i64, ms
	hmGroupLen       = 24 // u16
	hmTopicLen       = 26 // u16
	hmMsgIDLen       = 28 // u16
	hmPropsLen       = 30 // u16
)

// HalfMessage is one half (prepared) message as a transaction-check policy
// sees it. The byte slices alias the buffer it was read from or will be
// written to.
type HalfMessage struct {
	CheckTimes     int32 // checks made so far
	BornTimestamp  int64 // ms
	StoreTimestamp int64 // ms
	ProducerGroup  []byte
	Topic          []byte // the real topic, not the half topic
	MsgID          []byte // the client's message id (UNIQ_KEY)
	Properties     []byte // key 0x01 value 0x02 ...
}

// EncodedLen returns the size of h in the layout, or -1 if one of its
// fields is longer than the layout holds.
func (h *HalfMessage) EncodedLen() int {
	if len(h.ProducerGroup) > maxField || len(h.Topic) > maxField || len(h.MsgID) > maxField ||
		len(h.Properties) > maxField {
		return -1
	}
	return TxnRecordHeaderLen + len(h.ProducerGroup) + len(h.Topic) + len(h.MsgID) + len(h.Properties)
}

// AppendTxnHeader appends the batch header: the broker's clock in ms.
func AppendTxnHeader(dst []byte, nowMs int64) []byte { return le.AppendUint64(dst, uint64(nowMs)) }

// ReadTxnHeader splits the batch header off in.
func ReadTxnHeader(in []byte) (nowMs int64, rest []byte, err error) {
	if len(in) < TxnHeaderLen {
		return 0, nil, ErrLayout
	}
	return int64(le.Uint64(in)), in[TxnHeaderLen:], nil
}

// AppendHalfMessage appends h in the layout. h.EncodedLen must not be -1.
func AppendHalfMessage(dst []byte, h *HalfMessage) []byte {
	var b [TxnRecordHeaderLen]byte
	le.PutUint32(b[hmLen:], uint32(h.EncodedLen()))
	le.PutUint32(b[hmCheckTimes:], uint32(h.CheckTimes))
	le.PutUint64(b[hmBornTimestamp:], uint64(h.BornTimestamp))
	le.PutUint64(b[hmStoreTimestamp:], uint64(h.StoreTimestamp))
	le.PutUint16(b[hmGroupLen:], uint16(len(h.ProducerGroup)))
	le.PutUint16(b[hmTopicLen:], uint16(len(h.Topic)))
	le.PutUint16(b[hmMsgIDLen:], uint16(len(h.MsgID)))
	le.PutUint16(b[hmPropsLen:], uint16(len(h.Properties)))
	dst = append(dst, b[:]...)
	dst = append(dst, h.ProducerGroup...)
	dst = append(dst, h.Topic...)
	dst = append(dst, h.MsgID...)
	return append(dst, h.Properties...)
}

// ReadHalfMessage reads the record at the start of in into h without
// copying and returns the bytes after it.
func ReadHalfMessage(in []byte, h *HalfMessage) (rest []byte, err error) {
	if len(in) < TxnRecordHeaderLen {
		return nil, ErrLayout
	}
	b := in[:TxnRecordHeaderLen]
	n := uint64(le.Uint32(b[hmLen:]))
	groupLen := uint64(le.Uint16(b[hmGroupLen:]))
	topicLen := uint64(le.Uint16(b[hmTopicLen:]))
	idLen := uint64(le.Uint16(b[hmMsgIDLen:]))
	propsLen := uint64(le.Uint16(b[hmPropsLen:]))
	if n != TxnRecordHeaderLen+groupLen+topicLen+idLen+propsLen || n > uint64(len(in)) {
		return nil, ErrLayout
	}
	h.CheckTimes = int32(le.Uint32(b[hmCheckTimes:]))
	h.BornTimestamp = int64(le.Uint64(b[hmBornTimestamp:]))
	h.StoreTimestamp = int64(le.Uint64(b[hmStoreTimestamp:]))
	at := uint64(TxnRecordHeaderLen)
	h.ProducerGroup = in[at : at+groupLen : at+groupLen]
	at += groupLen
	h.Topic = in[at : at+topicLen : at+topicLen]
	at += topicLen
	h.MsgID = in[at : at+idLen : at+idLen]
	at += idLen
	h.Properties = in[at:n:n]
	return in[n:], nil
}

// PutTxnResult writes the i-th result at out: the action, then the wait in
// ms (meaningful for TxnWait).
func PutTxnResult(out []byte, i int, action TxnAction, waitMs uint32) {
	r := out[i*TxnResultLen : (i+1)*TxnResultLen]
	le.PutUint32(r, uint32(action))
	le.PutUint32(r[4:], waitMs)
}

// ReadTxnResult reads the i-th result at out.
func ReadTxnResult(out []byte, i int) (action TxnAction, waitMs uint32) {
	r := out[i*TxnResultLen : (i+1)*TxnResultLen]
	return TxnAction(le.Uint32(r)), le.Uint32(r[4:])
}
