package abi

// Queue is one message queue offered to an allocation strategy.
type Queue struct {
	Topic      string
	BrokerName string
	QueueID    int32
}

// AllocateRequest is the input of broker_allocate.
type AllocateRequest struct {
	Group    string   // consumer group
	ClientID string   // the client asking
	Clients  []string // every client of the group, sorted
	Queues   []Queue  // every queue of the topic, in the broker's order
}

// AppendAllocateRequest appends r in the allocate layout. It returns
// ErrLayout if a string is longer than 65535 bytes.
func AppendAllocateRequest(dst []byte, r *AllocateRequest) ([]byte, error) {
	var err error
	str := func(s string) {
		if len(s) > maxField {
			err = ErrLayout
			return
		}
		dst = le.AppendUint16(dst, uint16(len(s)))
		dst = append(dst, s...)
	}
	str(r.Group)
	str(r.ClientID)
	dst = le.AppendUint32(dst, uint32(len(r.Clients)))
	for _, c := range r.Clients {
		str(c)
	}
	dst = le.AppendUint32(dst, uint32(len(r.Queues)))
	for _, q := range r.Queues {
		dst = le.AppendUint32(dst, uint32(q.QueueID))
		str(q.Topic)
		str(q.BrokerName)
	}
	return dst, err
}

// ReadAllocateRequest decodes the allocate layout. The strings are copies.
func ReadAllocateRequest(in []byte) (AllocateRequest, error) {
	var (
		r   AllocateRequest
		bad bool
	)
	str := func() string {
		if bad || len(in) < 2 {
			bad = true
			return ""
		}
		n := int(le.Uint16(in))
		if 2+n > len(in) {
			bad = true
			return ""
		}
		s := string(in[2 : 2+n])
		in = in[2+n:]
		return s
	}
	count := func(min int) int {
		if bad || len(in) < 4 {
			bad = true
			return 0
		}
		n := uint64(le.Uint32(in))
		in = in[4:]
		// Every element takes at least min bytes: a count the input cannot
		// back is refused before anything is allocated for it.
		if n*uint64(min) > uint64(len(in)) {
			bad = true
			return 0
		}
		return int(n)
	}
	r.Group = str()
	r.ClientID = str()
	if n := count(2); n > 0 {
		r.Clients = make([]string, n)
		for i := range r.Clients {
			r.Clients[i] = str()
		}
	}
	if n := count(8); n > 0 {
		r.Queues = make([]Queue, n)
		for i := range r.Queues {
			if bad || len(in) < 4 {
				bad = true
				break
			}
			r.Queues[i].QueueID = int32(le.Uint32(in))
			in = in[4:]
			r.Queues[i].Topic = str()
			r.Queues[i].BrokerName = str()
		}
	}
	if bad || len(in) != 0 {
		return AllocateRequest{}, ErrLayout
	}
	return r, nil
}

// AppendIndex appends one assigned queue index to an allocate output.
func AppendIndex(dst []byte, i uint32) []byte { return le.AppendUint32(dst, i) }

// ReadIndex reads the i-th index of an allocate output.
func ReadIndex(out []byte, i int) uint32 { return le.Uint32(out[i*4:]) }
