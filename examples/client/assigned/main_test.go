package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/rmq-go/rmq/internal/brokertest"
)

func TestRun(t *testing.T) {
	e := brokertest.Start(t)
	group := brokertest.Name("g")
	if err := e.Broker.Admin().SetGroupStrategy(group, "AVG_BY_CIRCLE"); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := run(t.Context(), e.NamesrvAddr, brokertest.Name("T"), group, &out); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	// AVG_BY_CIRCLE deals the 8 queues out one by one: the first of the
	// three (sorted) client ids gets 0, 3 and 6.
	if !strings.Contains(out.String(), "holds 0 3 6\n") {
		t.Errorf("no consumer holds the by-circle share 0 3 6:\n%s", out.String())
	}
}
