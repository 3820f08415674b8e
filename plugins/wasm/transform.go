package wasm

import (
	"context"
	"fmt"

	"github.com/tetratelabs/wazero/api"

	"github.com/rmq-go/rmq/core/message"
	"github.com/rmq-go/rmq/sdk/abi"
)

// TransformMessage is one message offered to a transform, as the producer
// sent it.
type TransformMessage struct {
	Topic      string
	SysFlag    int32 // message.SysFlagCompressed: Body is zlib
	Properties message.Properties
	Body       []byte
}

// TransformResult is a transform's decision for one message. A zero
// TransformResult stores the message as sent.
type TransformResult struct {
	// Reject refuses the send, for Reason.
	Reject bool
	Reason string
	// Topic, when not empty, is the topic to store the message in instead.
	Topic string
	// Properties, when not nil, replace the message's properties (tags and
	// keys are properties).
	Properties message.Properties
	// Body, when not nil, replaces the message's body, which is then stored
	// uncompressed.
	Body []byte
}

// Changed reports whether r changes the message.
func (r *TransformResult) Changed() bool {
	return r.Topic != "" || r.Properties != nil || r.Body != nil
}

// Transform runs the plugin over the messages of one send, message by
// message, and fills out (len(out) == len(msgs)). It stops at the first
// message the plugin rejects: that result has Reject set and the results
// after it are zero. A compressed body is inflated for the plugin when it
// inflates within the host's bound; otherwise the plugin gets it as stored,
// with the compressed SysFlag bit still set.
//
// When the plugin fails (an error of its own, a trap, a timeout, output
// breaking the ABI, or disabled), the serving module's failure policy
// decides: under PolicyReject Transform returns the error, under PolicyPass
// it counts the error, zeroes out (every message stored as sent) and
// returns nil. The send is transformed all or nothing either way.
func (p *Plugin) Transform(ctx context.Context, msgs []TransformMessage, out []TransformResult) error {
	if len(out) != len(msgs) {
		panic(fmt.Sprintf("wasm: Transform with %d messages and %d results", len(msgs), len(out)))
	}
	if p.kind != KindTransform {
		return &Error{Plugin: p.name, Op: "transform", Err: wrapf(ErrKind, "plugin is a %s plugin", p.kind)}
	}
	clear(out)
	if len(msgs) == 0 {
		return nil
	}
	err := p.run(ctx, "transform", func(g *generation, inst *instance) (int, error) {
		for i := range msgs {
			if err := transformCall(ctx, inst, &msgs[i], &out[i]); err != nil {
				return i, err
			}
			if out[i].Reject {
				p.stats.rejected.Add(1)
				return i + 1, nil
			}
		}
		return len(msgs), nil
	})
	if err != nil {
		clear(out)
		if p.failurePolicy() == PolicyPass {
			return nil
		}
	}
	return err
}

// failurePolicy returns the failure policy of the module serving last,
// also once the plugin is closed.
func (p *Plugin) failurePolicy() Policy {
	if pol := p.policy.Load(); pol != nil {
		return *pol
	}
	return ""
}

// transformCall runs broker_transform over one message.
func transformCall(ctx context.Context, inst *instance, m *TransformMessage, out *TransformResult) error {
	rec := abi.TransformRecord{SysFlag: uint32(m.SysFlag), Topic: []byte(m.Topic), Properties: m.Properties, Body: m.Body}
	if m.SysFlag&message.SysFlagCompressed != 0 {
		if body, ok := inst.inflate(inst.props[:0], m.Body); ok {
			inst.props = body[:0]
			rec.Body = body
			rec.SysFlag &^= uint32(message.SysFlagCompressed)
		}
	}
	inLen := rec.EncodedLen()
	if inLen < 0 {
		return wrapf(ErrFailed, "message to topic %q does not fit the transform layout", m.Topic)
	}
	if err := inst.ensureBuffer(ctx, uint32(inLen)); err != nil {
		return err
	}
	abi.AppendTransformRecord(inst.view(0, uint32(inLen))[:0], &rec)
	inst.stack[0], inst.stack[1] = api.EncodeU32(inst.buf), api.EncodeU32(uint32(inLen))
	if err := inst.call(ctx, inst.kindFn); err != nil {
		return err
	}
	v := int64(inst.stack[0])
	if v < 0 {
		return inst.guestError(abi.Status(-v))
	}
	if v == 0 {
		return nil
	}
	ptr, n := abi.UnpackPtrLen(v)
	if n > abi.MaxTransformLen {
		return wrapf(ErrOutput, "broker_transform returned %d bytes, more than %d", n, abi.MaxTransformLen)
	}
	b, ok := inst.mem.Read(ptr, n)
	if !ok {
		return wrapf(ErrOutput, "broker_transform returned %#x+%d, outside memory", ptr, n)
	}
	r, err := abi.ReadTransformResult(b)
	if err != nil {
		return wrapf(ErrOutput, "broker_transform: %v", err)
	}
	if r.Action == abi.TransformReject {
		*out = TransformResult{Reject: true, Reason: string(r.Reason)}
		if out.Reason == "" {
			out.Reason = "rejected"
		}
		return nil
	}
	// The result lives in guest memory, which the next call reuses.
	*out = TransformResult{Topic: string(r.Topic)}
	if r.Properties != nil {
		out.Properties = append(message.Properties{}, r.Properties...)
	}
	if r.Body != nil {
		out.Body = append([]byte{}, r.Body...)
	}
	return nil
}
