package abi

// FilterRecordHeaderLen is the fixed part of a filter record.
const FilterRecordHeaderLen = 52

// Offsets inside a filter record.
const (
	frLen            = 0  // u32 record length, this field included
	frQueueID        = 4  // i32
	frQueueOffset    = 8  // i64
	frBornTimestamp  = 16 // i64, ms
	frStoreTimestamp = 24 // i64, ms
	frReconsume      = 32 // i32
	frSysFlag        = 36 // i32, the stored SYSFLAG
	frBodyLen        = 40 // u32, BodyAbsent when not sent
	frTopicLen       = 44 // u16
	frTagsLen        = 46 // u16
	frKeysLen        = 48 // u16
	frPropsLen       = 50 // u16
)

// maxField is the longest topic, tags, keys or properties string a filter
// record holds (a u16 length).
const maxField = 0xFFFF

// FilterRecord is one message as a filter sees it. The byte slices alias the
// buffer the record was read from or will be written to.
type FilterRecord struct {
	QueueID        int32
	QueueOffset    int64
	BornTimestamp  int64 // ms
	StoreTimestamp int64 // ms
	ReconsumeTimes int32
	SysFlag        int32 // the stored SYSFLAG (bit 0x1: body compressed)
	Topic          []byte
	Tags           []byte // the TAGS property
	Keys           []byte // the KEYS property, space-separated
	Properties     []byte // key 0x01 value 0x02 ...
	Body           []byte // nil unless HasBody
	HasBody        bool   // the body was sent
}

// EncodedLen returns the size of r in the filter layout, or -1 if one of its
// fields is longer than the layout holds.
func (r *FilterRecord) EncodedLen() int {
	if len(r.Topic) > maxField || len(r.Tags) > maxField || len(r.Keys) > maxField ||
		len(r.Properties) > maxField || uint64(len(r.Body)) >= BodyAbsent {
		return -1
	}
	n := FilterRecordHeaderLen + len(r.Topic) + len(r.Tags) + len(r.Keys) + len(r.Properties)
	if r.HasBody {
		n += len(r.Body)
	}
	return n
}

// FilterHeaderLen returns the size of a filter batch header for an
// expression of n bytes.
func FilterHeaderLen(n int) int { return 4 + n }

// AppendFilterHeader appends the batch header carrying expr.
func AppendFilterHeader(dst []byte, expr string) []byte {
	dst = le.AppendUint32(dst, uint32(len(expr)))
	return append(dst, expr...)
}

// AppendFilterRecord appends r in the filter layout. r.EncodedLen must not
// be -1.
func AppendFilterRecord(dst []byte, r *FilterRecord) []byte {
	n := r.EncodedLen()
	bodyLen := uint32(BodyAbsent)
	if r.HasBody {
		bodyLen = uint32(len(r.Body))
	}
	var h [FilterRecordHeaderLen]byte
	le.PutUint32(h[frLen:], uint32(n))
	le.PutUint32(h[frQueueID:], uint32(r.QueueID))
	le.PutUint64(h[frQueueOffset:], uint64(r.QueueOffset))
	le.PutUint64(h[frBornTimestamp:], uint64(r.BornTimestamp))
	le.PutUint64(h[frStoreTimestamp:], uint64(r.StoreTimestamp))
	le.PutUint32(h[frReconsume:], uint32(r.ReconsumeTimes))
	le.PutUint32(h[frSysFlag:], uint32(r.SysFlag))
	le.PutUint32(h[frBodyLen:], bodyLen)
	le.PutUint16(h[frTopicLen:], uint16(len(r.Topic)))
	le.PutUint16(h[frTagsLen:], uint16(len(r.Tags)))
	le.PutUint16(h[frKeysLen:], uint16(len(r.Keys)))
	le.PutUint16(h[frPropsLen:], uint16(len(r.Properties)))
	dst = append(dst, h[:]...)
	dst = append(dst, r.Topic...)
	dst = append(dst, r.Tags...)
	dst = append(dst, r.Keys...)
	dst = append(dst, r.Properties...)
	if r.HasBody {
		dst = append(dst, r.Body...)
	}
	return dst
}

// ReadFilterHeader splits the batch header off in, returning the expression
// and the records that follow.
func ReadFilterHeader(in []byte) (expr, rest []byte, err error) {
	if len(in) < 4 {
		return nil, nil, ErrLayout
	}
	n := le.Uint32(in)
	if n > MaxExpressionLen || uint64(n) > uint64(len(in)-4) {
		return nil, nil, ErrLayout
	}
	return in[4 : 4+n], in[4+n:], nil
}

// ReadFilterRecord reads the record at the start of in into r without
// copying and returns the bytes after it.
func ReadFilterRecord(in []byte, r *FilterRecord) (rest []byte, err error) {
	if len(in) < FilterRecordHeaderLen {
		return nil, ErrLayout
	}
	h := in[:FilterRecordHeaderLen]
	n := uint64(le.Uint32(h[frLen:]))
	bodyLen := le.Uint32(h[frBodyLen:])
	topicLen := uint64(le.Uint16(h[frTopicLen:]))
	tagsLen := uint64(le.Uint16(h[frTagsLen:]))
	keysLen := uint64(le.Uint16(h[frKeysLen:]))
	propsLen := uint64(le.Uint16(h[frPropsLen:]))
	want := FilterRecordHeaderLen + topicLen + tagsLen + keysLen + propsLen
	hasBody := bodyLen != BodyAbsent
	if hasBody {
		want += uint64(bodyLen)
	}
	if n != want || n > uint64(len(in)) {
		return nil, ErrLayout
	}
	r.QueueID = int32(le.Uint32(h[frQueueID:]))
	r.QueueOffset = int64(le.Uint64(h[frQueueOffset:]))
	r.BornTimestamp = int64(le.Uint64(h[frBornTimestamp:]))
	r.StoreTimestamp = int64(le.Uint64(h[frStoreTimestamp:]))
	r.ReconsumeTimes = int32(le.Uint32(h[frReconsume:]))
	r.SysFlag = int32(le.Uint32(h[frSysFlag:]))
	at := uint64(FilterRecordHeaderLen)
	r.Topic = in[at : at+topicLen : at+topicLen]
	at += topicLen
	r.Tags = in[at : at+tagsLen : at+tagsLen]
	at += tagsLen
	r.Keys = in[at : at+keysLen : at+keysLen]
	at += keysLen
	r.Properties = in[at : at+propsLen : at+propsLen]
	at += propsLen
	r.HasBody = hasBody
	if hasBody {
		r.Body = in[at:n:n]
	} else {
		r.Body = nil
	}
	return in[n:], nil
}

// AppendKeyList appends the key list broker_filter_keys points at: a u16
// count, then each key as a u16 length and its bytes. It returns ErrLayout
// for more than MaxFilterKeys keys or a key longer than 65535 bytes.
func AppendKeyList(dst []byte, keys []string) ([]byte, error) {
	if len(keys) > MaxFilterKeys {
		return dst, ErrLayout
	}
	dst = le.AppendUint16(dst, uint16(len(keys)))
	for _, k := range keys {
		if len(k) > maxField {
			return dst, ErrLayout
		}
		dst = le.AppendUint16(dst, uint16(len(k)))
		dst = append(dst, k...)
	}
	return dst, nil
}

// ReadKeyList decodes a key list. The keys are copies.
func ReadKeyList(b []byte) ([]string, error) {
	if len(b) < 2 {
		return nil, ErrLayout
	}
	n := int(le.Uint16(b))
	b = b[2:]
	if n > MaxFilterKeys || 2*n > len(b) {
		return nil, ErrLayout
	}
	keys := make([]string, n)
	for i := range keys {
		if len(b) < 2 {
			return nil, ErrLayout
		}
		k := int(le.Uint16(b))
		if 2+k > len(b) {
			return nil, ErrLayout
		}
		keys[i] = string(b[2 : 2+k])
		b = b[2+k:]
	}
	if len(b) != 0 {
		return nil, ErrLayout
	}
	return keys, nil
}

// ValueAbsent is the value length, in a resolved properties field
// (FlagFilterValues), of a named key the message does not have.
const ValueAbsent = 0xFFFF

// MaxValueLen is the longest value a resolved properties field holds: one
// less than ValueAbsent, and in practice less, since the field's length is
// a u16 too.
const MaxValueLen = ValueAbsent - 1

// AppendFilterValue appends one entry of a resolved properties field: the
// u16 length of v and its bytes, or ValueAbsent alone when ok is false. It
// returns ErrLayout for a value longer than MaxValueLen.
func AppendFilterValue(dst, v []byte, ok bool) ([]byte, error) {
	if !ok {
		return le.AppendUint16(dst, ValueAbsent), nil
	}
	if len(v) > MaxValueLen {
		return dst, ErrLayout
	}
	dst = le.AppendUint16(dst, uint16(len(v)))
	return append(dst, v...), nil
}

// ReadFilterValues splits a resolved properties field into exactly
// len(vals) entries: vals[i] is the value of the i-th named key (aliasing
// b), and bit i of the result is set when that key is present. It returns
// ErrLayout when b holds fewer or more entries, or more than
// MaxFilterKeys are asked for.
func ReadFilterValues(b []byte, vals [][]byte) (present uint64, err error) {
	if len(vals) > MaxFilterKeys {
		return 0, ErrLayout
	}
	for i := range vals {
		if len(b) < 2 {
			return 0, ErrLayout
		}
		n := int(le.Uint16(b))
		b = b[2:]
		if n == ValueAbsent {
			vals[i] = nil
			continue
		}
		if n > len(b) {
			return 0, ErrLayout
		}
		vals[i] = b[:n:n]
		present |= 1 << i
		b = b[n:]
	}
	if len(b) != 0 {
		return 0, ErrLayout
	}
	return present, nil
}
