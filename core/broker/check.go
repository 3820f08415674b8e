package broker

import "github.com/rmq-go/rmq/core/store"

// Check returns every problem of o that New would refuse it for, without
// building a broker; a missing Store is not one of them.
func (o Options) Check() error {
	if o.Store == nil {
		// withDefaults only asks that it be set.
		o.Store = new(store.Store)
	}
	_, err := o.withDefaults()
	return err
}
