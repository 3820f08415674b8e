package allocate_test

import (
	"fmt"

	"github.com/rmq-go/rmq/core/allocate"
)

func ExampleByName() {
	s, _ := allocate.ByName("avg_by_circle")
	qs := queues("broker-a", 5)
	for _, c := range []string{"c2", "c1"} {
		mine, _ := s.Allocate("group", c, []string{"c2", "c1"}, qs)
		fmt.Println(s.Name(), c, short(mine))
	}
	// Output:
	// AVG_BY_CIRCLE c2 [broker-a:1 broker-a:3]
	// AVG_BY_CIRCLE c1 [broker-a:0 broker-a:2 broker-a:4]
}
