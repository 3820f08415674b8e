// Command jsonfield is a broker filter plugin: a class filter over JSON
// message bodies. A consumer subscribes with the plugin's expression type
// (for example CLASS) and an expression of conditions joined by "&":
//
//	region=eu                  field region is the string "eu"
//	user.country=de&tier=gold  nested field user.country is "de", and tier is "gold"
//	count=3                    field count is the JSON literal 3 (as written)
//	vip=true                   field vip is true
//
// A condition matches a string field by its decoded value and any other
// field by its JSON text. A message matches when every condition holds; a
// body that is not a JSON object does not match. It registers an
// sdk.BodyFilterFunc, so the broker sends bodies and inflates compressed
// ones first, and reads fields with sdk's Message.JSONField, which scans the
// body in place without decoding it into Go values.
//
// Build it with
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o jsonfield.wasm .
package main
