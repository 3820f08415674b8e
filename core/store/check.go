package store

// Check returns every problem of o that Open would refuse it for, without
// opening anything; an empty Dir is not one of them.
func (o Options) Check() error {
	if o.Dir == "" {
		o.Dir = "."
	}
	_, err := o.withDefaults()
	return err
}
