package wasm_test

import (
	"context"
	"fmt"

	"github.com/rmq-go/rmq/core/message"
	"github.com/rmq-go/rmq/plugins/wasm"
)

// A registry loads the broker's plugin list; a filter plugin then compiles
// one Filter per subscription expression.
func ExampleRegistry() {
	path, err := buildGuest("basic") // GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	reg, err := wasm.NewRegistry(wasm.RegistryOptions{CacheDir: cacheDir})
	if err != nil {
		panic(err)
	}
	defer reg.Close(ctx)
	report, err := reg.Apply(ctx, []wasm.Options{
		{Name: "tags", Kind: wasm.KindFilter, ExpressionType: "CLASS", Path: path},
	})
	if err != nil {
		panic(err)
	}
	fmt.Println("added:", report.Added)

	f, err := reg.Filter("CLASS").Filter("A||C")
	if err != nil {
		panic(err)
	}
	var batch []message.Record
	for _, tag := range []string{"A", "B", "C", "D"} {
		r, _ := message.AppendRecord(nil, &message.Message{
			Topic:      "orders",
			Properties: message.EncodeProperties(map[string]string{"TAGS": tag}),
		})
		batch = append(batch, r)
	}
	out := make([]bool, len(batch))
	if err := f.Match(batch, out); err != nil {
		panic(err)
	}
	fmt.Println("matches:", out)
	// Output:
	// added: [tags]
	// matches: [true false true false]
}
