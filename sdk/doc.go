// Package sdk is the Go API for writing broker plugins: message filters,
// queue-allocation strategies, transaction-check policies and transforms of
// sent messages that the broker loads as WebAssembly modules (see package
// plugins/wasm).
//
// A plugin is a main package that registers what it serves from an init
// function and is built as a WASI reactor:
//
//	package main
//
//	import "github.com/rmq-go/rmq/sdk"
//
//	func init() { sdk.RegisterFilter(sdk.FilterFunc(compile)) }
//
//	func main() {} // required, never called
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o plugin.wasm .
//
// The sdk is a Go module of its own, github.com/rmq-go/rmq/sdk, that needs
// only the standard library, so a plugin's module requires it and nothing
// else. `broker plugin new` writes such a module.
//
// Importing the package adds every export of ABI v1 (package sdk/abi) to the
// module. Which kinds the module serves is what it registers: broker_info
// reports them, and the function of a kind nobody registered answers "not
// implemented", so the broker refuses to load the module for that kind.
//
// # Views
//
// A Message or HalfMessage handed to a plugin is a view into the call's
// buffer: its strings and slices are valid only until the call returns. The
// SDK's own path reads records in place and allocates nothing per message;
// a plugin that keeps a value past the call copies it.
//
// Properties reads the properties string exactly as the broker's native
// filters do: the sdk keeps its own small reader (it is a module of its own
// and imports nothing of the broker's), and a differential test in the
// broker's module holds it to the broker's codec.
//
// A filter sees message bodies only if it asks: BodyFilterFunc (or a
// Filter implementing BodyInflater) gets them inflated by the broker when
// producers compressed them, and LookupJSON or Message.JSONField read one
// field of a JSON body in place, without decoding the document.
//
// A filter's Matcher that implements PropertyReader names the properties
// its expression reads; the broker then sends only those, which saves the
// guest most of its work on messages with many properties. A Filter that
// implements ValueFilter (ValueFilterFunc) goes further (ABI v1.4): the
// broker looks those properties up itself and sends their values in the
// order named, which Message.Value and Message.Values read without scanning
// anything; Property and Properties still answer over the named keys. The
// native test path (CheckSelfTests) resolves the values as the broker does,
// so a plain go test of the guest runs the same code.
//
// # Config and lifecycle
//
// Each module instance runs the init functions, then broker_init with the
// plugin's config bytes (from the broker's config file): registered values
// that implement Initializer get them, and Config returns them afterwards.
// The broker runs a pool of instances; an instance runs one call at a time,
// so plugin code needs no locks, but instances share nothing, so state kept
// in globals is per instance.
//
// # Errors and panics
//
// An error returned by a plugin never means "no match": the broker holds
// the subscription (or treats the transaction as unknown, or keeps the
// previous assignment). A panic is not recovered: the Go runtime prints it
// to stderr and exits, the broker discards the instance, reports the panic
// with the tail of its stderr, and starts a fresh instance.
//
// # ABI versions and compatibility
//
// The ABI has a major and a minor version, abi.Version and abi.Minor (today
// v1.4). The major is in the name of the marker a module exports
// (broker_abi_v1) and in the sdk's module path: this module speaks v1, and
// an ABI v2 would come as the module github.com/rmq-go/rmq/sdk/v2. The minor
// is in the module's info block. The rule a broker applies when it loads a
// module:
//
//   - a broker speaking vM.N loads a module built for vM.K when K ≤ N;
//   - it refuses a module of another major, or of a later minor (K > N: the
//     module may count on what this broker does not do), with an error that
//     names both versions (plugins/wasm's ErrABIVersion).
//
// So a module keeps working across broker upgrades within a major, and a
// broker upgrade never has to wait for its plugins. Within a major only
// additions are made, each raising the minor: an optional export, an info
// flag, an import. Removing or changing anything takes a new major.
//
// # Transforms
//
// A Transform (RegisterTransform, TransformFunc; ABI v1.2) sees each
// message sent to the topics its config entry names, before the broker
// stores it, one message per call. Through the TransformMessage it may
// change the topic (SetTopic), properties, tags and keys (SetProperty,
// SetTags, SetKeys), the body (SetBody), or refuse the send (Reject): the
// producer gets the reason and nothing of the send is stored, a batch
// included. TransformForTest runs it natively in the author's tests.
//
// # Self-tests
//
// AddFilterTest, AddAllocateTest, AddTxnTest and AddTransformTest register
// vectors the broker replays through the real call path before a new or
// reloaded module serves traffic; CheckSelfTests runs them natively in the
// author's own tests. A transform test (ABI v1.3) states the outcome, not
// the bytes: stored as sent, stored with the topic, tags, keys, properties
// or body it gives, or rejected with a reason containing its text.
package sdk
