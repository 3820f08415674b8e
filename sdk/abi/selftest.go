package abi

// Vector is one self-test case: a call's input and the output a correct
// module produces for it. The host replays the vectors of the kind it loads
// a module for before the module serves traffic.
type Vector struct {
	Kind  Kinds  // exactly one kind
	Count uint32 // the call's count argument (0 for allocate)
	In    []byte // the call's input, in the kind's layout
	Out   []byte // the expected output: result bytes, txn results or indices
}

// vectorHeaderLen is the fixed part of a vector.
const vectorHeaderLen = 4 + 4 + 4 + 4

// AppendVector appends one vector to a self-test blob that AppendVectorCount
// started.
func AppendVector(dst []byte, v *Vector) []byte {
	dst = append(dst, byte(v.Kind), 0, 0, 0)
	dst = le.AppendUint32(dst, v.Count)
	dst = le.AppendUint32(dst, uint32(len(v.In)))
	dst = le.AppendUint32(dst, uint32(len(v.Out)))
	dst = append(dst, v.In...)
	return append(dst, v.Out...)
}

// AppendVectorCount starts a self-test blob of n vectors.
func AppendVectorCount(dst []byte, n int) []byte { return le.AppendUint32(dst, uint32(n)) }

// ReadVectors decodes a self-test blob. The vectors alias b.
func ReadVectors(b []byte) ([]Vector, error) {
	if len(b) < 4 {
		return nil, ErrLayout
	}
	n := uint64(le.Uint32(b))
	b = b[4:]
	if n*vectorHeaderLen > uint64(len(b)) {
		return nil, ErrLayout
	}
	vs := make([]Vector, 0, n)
	for range n {
		if len(b) < vectorHeaderLen {
			return nil, ErrLayout
		}
		k := Kinds(b[0])
		count := le.Uint32(b[4:])
		inLen := uint64(le.Uint32(b[8:]))
		outLen := uint64(le.Uint32(b[12:]))
		b = b[vectorHeaderLen:]
		if inLen+outLen > uint64(len(b)) {
			return nil, ErrLayout
		}
		vs = append(vs, Vector{
			Kind:  k,
			Count: count,
			In:    b[:inLen:inLen],
			Out:   b[inLen : inLen+outLen : inLen+outLen],
		})
		b = b[inLen+outLen:]
	}
	if len(b) != 0 {
		return nil, ErrLayout
	}
	return vs, nil
}
