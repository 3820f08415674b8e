package broker

import (
	"errors"

	"github.com/rmq-go/rmq/core/store"
)

// extRecordPrefix keeps records of components wired around the broker
// apart from the broker's own metadata.
const extRecordPrefix = "ext/"

// ExtRecord returns a small durable record kept for a component wired
// around the broker (the NATS bridge's resend keys, for example); ok is
// false when there is none.
func (b *Broker) ExtRecord(name string) (v []byte, ok bool, err error) {
	v, err = b.store.Meta(extRecordPrefix + name)
	if errors.Is(err, store.ErrNotFound) {
		return nil, false, nil
	}
	return v, err == nil, err
}

// PutExtRecord writes a record durably (fsync before returning).
func (b *Broker) PutExtRecord(name string, v []byte) error {
	return b.store.PutMeta(extRecordPrefix+name, v)
}

// DeleteExtRecord removes a record durably.
func (b *Broker) DeleteExtRecord(name string) error {
	return b.store.DeleteMeta(extRecordPrefix + name)
}

// EachExtRecord calls fn for every record whose name starts with prefix,
// in name order, stopping at the first error.
func (b *Broker) EachExtRecord(prefix string, fn func(name string, v []byte) error) error {
	return b.store.EachMeta(extRecordPrefix+prefix, func(name string, v []byte) error {
		return fn(name[len(extRecordPrefix):], v)
	})
}
