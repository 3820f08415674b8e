// Command chaostransform is a transform the end-to-end tests use to make a
// transform misbehave on purpose. By message body: "trap" panics, "spin"
// loops until the broker's deadline stops it, "reject:why" rejects with
// reason why. Every other message goes to the topic named by the config's
// "route", or is stored unchanged when the config names none.
package main

import (
	"encoding/json"
	"strings"

	"github.com/rmq-go/rmq/sdk"
)

var route string

type chaos struct{}

func (chaos) Init(config []byte) error {
	var c struct{ Route string }
	if len(config) > 0 {
		if err := json.Unmarshal(config, &c); err != nil {
			return err
		}
	}
	route = c.Route
	return nil
}

var sink int

func (chaos) Transform(m *sdk.TransformMessage) error {
	body := string(m.Body())
	switch {
	case body == "trap":
		panic("chaostransform: asked to trap")
	case body == "spin":
		for i := 0; ; i++ {
			sink += i
		}
	case strings.HasPrefix(body, "reject:"):
		m.Reject(strings.TrimPrefix(body, "reject:"))
	case route != "":
		m.SetTopic(route)
	}
	return nil
}

func init() { sdk.RegisterTransform(chaos{}) }

func main() {}
