package message

import (
	"encoding/binary"
)

// batchFixedLen is the fixed part of a batch entry: TOTALSIZE, MAGICCODE,
// BODYCRC, FLAG, BODYLEN and PROPERTIESLEN.
const batchFixedLen = 4 + 4 + 4 + 4 + 4 + 2

// BatchEntry is one message of a SEND_BATCH_MESSAGE body. Body and
// Properties alias the batch body.
type BatchEntry struct {
	Flag       int32
	Body       []byte
	Properties Properties
}

// DecodeBatch splits a SEND_BATCH_MESSAGE body into its entries. An empty
// body, an entry whose TOTALSIZE disagrees with its fields, or trailing bytes
// are errors: a batch is stored all or nothing.
func DecodeBatch(body []byte) ([]BatchEntry, error) {
	if len(body) == 0 {
		return nil, malformed("empty batch body")
	}
	be := binary.BigEndian
	var out []BatchEntry
	for off := 0; off < len(body); {
		rest := body[off:]
		if len(rest) < batchFixedLen {
			return nil, malformed("batch entry at byte %d: %d bytes left, need at least %d", off, len(rest), batchFixedLen)
		}
		size := int(int32(be.Uint32(rest)))
		if size < batchFixedLen || size > len(rest) {
			return nil, malformed("batch entry at byte %d: size %d with %d bytes left", off, size, len(rest))
		}
		e := rest[:size]
		flag := int32(be.Uint32(e[12:]))
		bodyLen := int(int32(be.Uint32(e[16:])))
		if bodyLen < 0 || 20+bodyLen+2 > size {
			return nil, malformed("batch entry at byte %d: body length %d does not fit size %d", off, bodyLen, size)
		}
		propsAt := 20 + bodyLen
		propsLen := int(int16(be.Uint16(e[propsAt:])))
		if propsLen < 0 || propsAt+2+propsLen != size {
			return nil, malformed("batch entry at byte %d: properties length %d does not end the entry", off, propsLen)
		}
		out = append(out, BatchEntry{
			Flag:       flag,
			Body:       e[20:propsAt],
			Properties: Properties(e[propsAt+2 : propsAt+2+propsLen]),
		})
		off += size
	}
	return out, nil
}

// AppendBatchEntry appends one entry in the SEND_BATCH_MESSAGE layout, as a
// client writes it (MAGICCODE and BODYCRC zero).
func AppendBatchEntry(dst []byte, e BatchEntry) ([]byte, error) {
	if len(e.Properties) > MaxPropertiesLen {
		return dst, ErrPropertiesTooLong
	}
	be := binary.BigEndian
	dst = be.AppendUint32(dst, uint32(batchFixedLen+len(e.Body)+len(e.Properties)))
	dst = be.AppendUint32(dst, 0)
	dst = be.AppendUint32(dst, 0)
	dst = be.AppendUint32(dst, uint32(e.Flag))
	dst = be.AppendUint32(dst, uint32(len(e.Body)))
	dst = append(dst, e.Body...)
	dst = be.AppendUint16(dst, uint16(len(e.Properties)))
	return append(dst, e.Properties...), nil
}
