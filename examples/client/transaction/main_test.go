package main

import (
	"bytes"
	"testing"
	"time"

	"github.com/rmq-go/rmq/internal/brokertest"
	"github.com/rmq-go/rmq/internal/server"
)

func TestRun(t *testing.T) {
	// Check back after 300 ms instead of 6 s.
	e := brokertest.Start(t, func(c *server.Config) {
		c.Broker.TxnTimeout = 300 * time.Millisecond
		c.Broker.TxnCheckInterval = 200 * time.Millisecond
	})
	var out bytes.Buffer
	if err := run(t.Context(), e.NamesrvAddr, brokertest.Name("T"), &out); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
}
