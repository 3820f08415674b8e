package main

import (
	"bytes"
	"testing"

	"github.com/rmq-go/rmq/internal/brokertest"
)

func TestRun(t *testing.T) {
	e := brokertest.Start(t)
	var out bytes.Buffer
	if err := run(t.Context(), e.NamesrvAddr, brokertest.Name("T"), &out); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
}
