package abi

// A transform call carries one message: broker_transform(in, len) gets a
// transform record and returns 0 (pass the message unchanged), PackPtrLen
// of a transform result (change or reject it), or a negated status.

// TransformRecordHeaderLen is the fixed part of a transform record.
const TransformRecordHeaderLen = 16

// Offsets inside a transform record.
const (
	trSysFlag  = 0  // u32 the message's SysFlag (bit 0: body compressed)
	trTopicLen = 4  // u16
	trPad      = 6  // u16, zero
	trPropsLen = 8  // u32
	trBodyLen  = 12 // u32
)

// TransformResultHeaderLen is the fixed part of a transform result.
const TransformResultHeaderLen = 20

// Offsets inside a transform result.
const (
	tsAction    = 0  // u32 TransformAction
	tsTopicLen  = 4  // u32, or Unchanged
	tsPropsLen  = 8  // u32, or Unchanged
	tsBodyLen   = 12 // u32, or Unchanged
	tsReasonLen = 16 // u32, at most MaxErrorLen
)

// Unchanged is the length of a transform result field the guest leaves as
// the message had it.
const Unchanged = 0xFFFFFFFF

// MaxTopicLen is the longest topic a transform may send a message to.
const MaxTopicLen = 127

// MaxTransformLen is the longest transform result.
const MaxTransformLen = 16 << 20

// TransformAction is what a transform decides for a message.
type TransformAction uint32

// The transform actions. A guest that passes a message unchanged returns 0
// instead of a result.
const (
	TransformUnset  TransformAction = 0 // not written: the host treats it as an error
	TransformChange TransformAction = 1 // store the message with the result's fields
	TransformReject TransformAction = 2 // refuse the send with the result's reason
)

// TransformRecord is a message as a transform sees it. The byte slices
// alias the buffer it was read from or will be written to.
type TransformRecord struct {
	SysFlag    uint32
	Topic      []byte
	Properties []byte // key 0x01 value 0x02 ...
	Body       []byte
}

// EncodedLen returns the size of r in the layout, or -1 if a field is
// longer than the layout holds.
func (r *TransformRecord) EncodedLen() int {
	if len(r.Topic) > maxField || uint64(len(r.Properties)) > 0xFFFFFFFF || uint64(len(r.Body)) > 0xFFFFFFFE {
		return -1
	}
	return TransformRecordHeaderLen + len(r.Topic) + len(r.Properties) + len(r.Body)
}

// AppendTransformRecord appends r in the layout. r.EncodedLen must not be
// -1.
func AppendTransformRecord(dst []byte, r *TransformRecord) []byte {
	var b [TransformRecordHeaderLen]byte
	le.PutUint32(b[trSysFlag:], r.SysFlag)
	le.PutUint16(b[trTopicLen:], uint16(len(r.Topic)))
	le.PutUint32(b[trPropsLen:], uint32(len(r.Properties)))
	le.PutUint32(b[trBodyLen:], uint32(len(r.Body)))
	dst = append(dst, b[:]...)
	dst = append(dst, r.Topic...)
	dst = append(dst, r.Properties...)
	return append(dst, r.Body...)
}

// ReadTransformRecord reads a whole transform record from in without
// copying.
func ReadTransformRecord(in []byte, r *TransformRecord) error {
	if len(in) < TransformRecordHeaderLen || le.Uint16(in[trPad:]) != 0 {
		return ErrLayout
	}
	topicLen := uint64(le.Uint16(in[trTopicLen:]))
	propsLen := uint64(le.Uint32(in[trPropsLen:]))
	bodyLen := uint64(le.Uint32(in[trBodyLen:]))
	if TransformRecordHeaderLen+topicLen+propsLen+bodyLen != uint64(len(in)) {
		return ErrLayout
	}
	r.SysFlag = le.Uint32(in[trSysFlag:])
	at := uint64(TransformRecordHeaderLen)
	r.Topic = in[at : at+topicLen : at+topicLen]
	at += topicLen
	r.Properties = in[at : at+propsLen : at+propsLen]
	at += propsLen
	r.Body = in[at:len(in):len(in)]
	return nil
}

// TransformResult is a transform's decision for one message. A nil field
// of a change leaves the message's own; Reason is for a reject.
type TransformResult struct {
	Action     TransformAction
	Topic      []byte // nil: unchanged
	Properties []byte // nil: unchanged
	Body       []byte // nil: unchanged
	Reason     []byte
}

func fieldLen(b []byte) uint32 {
	if b == nil {
		return Unchanged
	}
	return uint32(len(b))
}

// AppendTransformResult appends r in the layout. The caller keeps the
// fields within the limits ReadTransformResult checks.
func AppendTransformResult(dst []byte, r *TransformResult) []byte {
	var b [TransformResultHeaderLen]byte
	le.PutUint32(b[tsAction:], uint32(r.Action))
	le.PutUint32(b[tsTopicLen:], fieldLen(r.Topic))
	le.PutUint32(b[tsPropsLen:], fieldLen(r.Properties))
	le.PutUint32(b[tsBodyLen:], fieldLen(r.Body))
	le.PutUint32(b[tsReasonLen:], uint32(len(r.Reason)))
	dst = append(dst, b[:]...)
	dst = append(dst, r.Topic...)
	dst = append(dst, r.Properties...)
	dst = append(dst, r.Body...)
	return append(dst, r.Reason...)
}

// ReadTransformResult decodes a transform result that fills b exactly,
// without copying. It checks the action, that every length fits, that a
// changed topic is 1 to MaxTopicLen bytes, that a reason is at most
// MaxErrorLen bytes, and that a reject changes nothing.
func ReadTransformResult(b []byte) (TransformResult, error) {
	if len(b) < TransformResultHeaderLen {
		return TransformResult{}, ErrLayout
	}
	r := TransformResult{Action: TransformAction(le.Uint32(b[tsAction:]))}
	if r.Action != TransformChange && r.Action != TransformReject {
		return TransformResult{}, ErrLayout
	}
	lens := [4]uint32{le.Uint32(b[tsTopicLen:]), le.Uint32(b[tsPropsLen:]), le.Uint32(b[tsBodyLen:]), le.Uint32(b[tsReasonLen:])}
	if lens[3] > MaxErrorLen || lens[3] == Unchanged {
		return TransformResult{}, ErrLayout
	}
	if t := lens[0]; t != Unchanged && (t == 0 || t > MaxTopicLen) {
		return TransformResult{}, ErrLayout
	}
	if r.Action == TransformReject && (lens[0] != Unchanged || lens[1] != Unchanged || lens[2] != Unchanged) {
		return TransformResult{}, ErrLayout
	}
	total := uint64(TransformResultHeaderLen)
	for _, n := range lens {
		if n != Unchanged {
			total += uint64(n)
		}
	}
	if total != uint64(len(b)) {
		return TransformResult{}, ErrLayout
	}
	at := uint64(TransformResultHeaderLen)
	field := func(n uint32) []byte {
		if n == Unchanged {
			return nil
		}
		f := b[at : at+uint64(n) : at+uint64(n)]
		at += uint64(n)
		return f
	}
	r.Topic, r.Properties, r.Body, r.Reason = field(lens[0]), field(lens[1]), field(lens[2]), field(lens[3])
	if r.Reason == nil {
		r.Reason = []byte{}
	}
	return r, nil
}
