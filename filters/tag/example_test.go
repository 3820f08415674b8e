package tag_test

import (
	"fmt"

	"github.com/rmq-go/rmq/core/message"
	"github.com/rmq-go/rmq/filters/tag"
)

func Example() {
	f, err := tag.Compile(" TagA ||TagB|| ")
	if err != nil {
		panic(err)
	}
	fmt.Println(f)
	fmt.Println(f.MatchTagHash(message.TagHash("TagB")), f.MatchTagHash(message.TagHash("TagC")))
	fmt.Println(f.MatchTag("TagA"), f.MatchTag("taga"))

	_, err = tag.Compile("TagA | TagB")
	fmt.Println(err)
	// Output:
	// TagA || TagB
	// true false
	// true false
	// tag: invalid expression: tag "TagA | TagB" holds '|'; separate tags with "||"
}
