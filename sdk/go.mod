module github.com/rmq-go/rmq/sdk

// Go 1.24 brought go:wasmexport, which every plugin export needs.
go 1.24.0
