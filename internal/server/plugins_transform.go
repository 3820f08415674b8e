package server

import (
	"context"
	"fmt"
	"path"

	"github.com/rmq-go/rmq/core/broker"
	"github.com/rmq-go/rmq/core/message"
	"github.com/rmq-go/rmq/plugins/wasm"
)

// transformEntry is one transform plugin of an applied list: the topic
// patterns of its config entry and the plugin.
type transformEntry struct {
	name   string
	topics []string // names or path.Match patterns ("Audit*")
	p      *wasm.Plugin
}

// matches reports whether the entry transforms sends to topic.
func (e *transformEntry) matches(topic string) bool {
	for _, pat := range e.topics {
		if ok, _ := path.Match(pat, topic); ok {
			return true
		}
	}
	return false
}

// sendTransform is the broker's Options.SendTransform: the transforms
// whose topics match, in the order of the plugin list, or nil.
func (h *pluginHost) sendTransform(topic string) broker.SendTransform {
	set := h.set.Load()
	var chain transformChain
	for i := range set.transforms {
		if e := &set.transforms[i]; e.matches(topic) {
			chain = append(chain, e)
		}
	}
	if chain == nil {
		return nil
	}
	return chain
}

// transformChain runs transforms one after another over a send; each sees
// what the previous one made of the messages.
type transformChain []*transformEntry

// TransformSend implements broker.SendTransform.
func (c transformChain) TransformSend(ctx context.Context, msgs []*message.Message) error {
	in := make([]wasm.TransformMessage, len(msgs))
	out := make([]wasm.TransformResult, len(msgs))
	for _, e := range c {
		for i, m := range msgs {
			in[i] = wasm.TransformMessage{Topic: m.Topic, SysFlag: m.SysFlag, Properties: m.Properties, Body: m.Body}
		}
		if err := e.p.Transform(ctx, in, out); err != nil {
			return err
		}
		for i := range out {
			if out[i].Reject {
				if len(msgs) > 1 {
					return fmt.Errorf("%w by transform %s: message %d of the batch: %s", broker.ErrSendRejected, e.name, i, out[i].Reason)
				}
				return fmt.Errorf("%w by transform %s: %s", broker.ErrSendRejected, e.name, out[i].Reason)
			}
		}
		for i, m := range msgs {
			r := &out[i]
			if r.Topic != "" {
				m.Topic = r.Topic
			}
			if r.Properties != nil {
				m.Properties = r.Properties
			}
			if r.Body != nil {
				m.Body = r.Body
				m.SysFlag &^= message.SysFlagCompressed
			}
		}
	}
	return nil
}
