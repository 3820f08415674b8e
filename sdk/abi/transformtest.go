package abi

import (
	"bytes"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// TransformExpectation is the expected output of a transform self-test
// vector (ABI v1.3): what the transform must make of the vector's input,
// a transform record. The host compares outcomes, not bytes, so a
// transform may write its properties in any order.
type TransformExpectation struct {
	// Name names the vector in the host's error when it fails.
	Name string
	// Result is nil when the message must be stored as sent. For a
	// TransformChange, each field that is not nil is what the message must
	// hold afterwards (properties compared as a set of pairs), and each nil
	// field must be as sent; a change that changes nothing is the same as
	// passing. For a TransformReject, the transform must reject the message
	// with a reason that contains Reason.
	Result *TransformResult
}

// AppendTransformExpectation appends e in the layout of a transform
// vector's expected output: a u16 name length, the name, and then nothing
// (the message passes) or a transform result. The name is cut to 65535
// bytes.
func AppendTransformExpectation(dst []byte, e *TransformExpectation) []byte {
	name := e.Name[:min(len(e.Name), maxField)]
	dst = le.AppendUint16(dst, uint16(len(name)))
	dst = append(dst, name...)
	if e.Result == nil {
		return dst
	}
	return AppendTransformResult(dst, e.Result)
}

// ReadTransformExpectation decodes the expected output of a transform
// vector without copying.
func ReadTransformExpectation(b []byte) (TransformExpectation, error) {
	if len(b) < 2 || uint64(len(b)) < 2+uint64(le.Uint16(b)) {
		return TransformExpectation{}, ErrLayout
	}
	n := int(le.Uint16(b))
	e := TransformExpectation{Name: string(b[2 : 2+n])}
	if rest := b[2+n:]; len(rest) > 0 {
		r, err := ReadTransformResult(rest)
		if err != nil {
			return TransformExpectation{}, err
		}
		e.Result = &r
	}
	return e, nil
}

// Check compares what a transform made of in with e: got is nil when the
// transform passed the message unchanged. It returns nil when they agree,
// or an error describing the first difference.
func (e *TransformExpectation) Check(in *TransformRecord, got *TransformResult) error {
	if e.Result != nil && e.Result.Action == TransformReject {
		switch {
		case got == nil || got.Action != TransformReject:
			return fmt.Errorf("the message was stored, want it rejected with a reason containing %q", e.Result.Reason)
		case !bytes.Contains(got.Reason, e.Result.Reason):
			return fmt.Errorf("rejected with %q, want a reason containing %q", got.Reason, e.Result.Reason)
		}
		return nil
	}
	if got != nil && got.Action == TransformReject {
		return fmt.Errorf("rejected with %q, want the message stored", got.Reason)
	}
	want := e.Result
	if want == nil {
		want = &TransformResult{}
	}
	if g, w := outcome(in.Topic, got, func(r *TransformResult) []byte { return r.Topic }), outcome(in.Topic, want, func(r *TransformResult) []byte { return r.Topic }); !bytes.Equal(g, w) {
		return fmt.Errorf("topic %q, want %q", g, w)
	}
	g := pairs(outcome(in.Properties, got, func(r *TransformResult) []byte { return r.Properties }))
	w := pairs(outcome(in.Properties, want, func(r *TransformResult) []byte { return r.Properties }))
	if !maps.Equal(g, w) {
		return fmt.Errorf("properties %s, want %s", formatPairs(g), formatPairs(w))
	}
	if g, w := outcome(in.Body, got, func(r *TransformResult) []byte { return r.Body }), outcome(in.Body, want, func(r *TransformResult) []byte { return r.Body }); !bytes.Equal(g, w) {
		return fmt.Errorf("body %s, want %s", quoteCut(g), quoteCut(w))
	}
	return nil
}

// outcome returns field of r, or sent when r is nil or leaves it as sent.
func outcome(sent []byte, r *TransformResult, field func(*TransformResult) []byte) []byte {
	if r == nil {
		return sent
	}
	if f := field(r); f != nil {
		return f
	}
	return sent
}

// pairs decodes a properties string as readers do: a later value of a key
// wins, and pieces that are not one key and one value are skipped.
func pairs(p []byte) map[string]string {
	m := make(map[string]string)
	for len(p) > 0 {
		piece := p
		if i := bytes.IndexByte(p, 0x02); i >= 0 {
			piece, p = p[:i], p[i+1:]
		} else {
			p = nil
		}
		if k, v, ok := bytes.Cut(piece, []byte{0x01}); ok && bytes.IndexByte(v, 0x01) < 0 {
			m[string(k)] = string(v)
		}
	}
	return m
}

// formatPairs writes m sorted by key, as {k=v, ...}.
func formatPairs(m map[string]string) string {
	keys := slices.Sorted(maps.Keys(m))
	var b strings.Builder
	b.WriteByte('{')
	for i, k := range keys {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s=%q", k, m[k])
	}
	b.WriteByte('}')
	return b.String()
}

// quoteCut quotes the first 64 bytes of b, saying how many it left out.
func quoteCut(b []byte) string {
	if len(b) <= 64 {
		return fmt.Sprintf("%q", b)
	}
	return fmt.Sprintf("%q… (%d bytes)", b[:64], len(b))
}
