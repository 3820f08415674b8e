package acl

import "fmt"

// Perm is a permission on a topic or group: what an account holds there,
// or what a request needs. An account holding Deny on a resource is
// refused there whatever its defaults say.
type Perm uint8

// Permissions, spelled in configuration as RocketMQ spells them.
const (
	Deny   Perm = 0         // DENY: nothing
	Pub    Perm = 1 << 0    // PUB: send to a topic
	Sub    Perm = 1 << 1    // SUB: consume a topic, act as a consumer group
	PubSub Perm = Pub | Sub // PUB|SUB (also SUB|PUB, ANY); as a need: either one
)

// ParsePerm parses RocketMQ's spelling of a permission: DENY, PUB, SUB,
// PUB|SUB, SUB|PUB or ANY. RocketMQ reads anything else as DENY; here it
// is an error, so a typo cannot silently lock an account out.
func ParsePerm(s string) (Perm, error) {
	switch s {
	case "DENY":
		return Deny, nil
	case "PUB":
		return Pub, nil
	case "SUB":
		return Sub, nil
	case "PUB|SUB", "SUB|PUB", "ANY":
		return PubSub, nil
	}
	return Deny, fmt.Errorf("permission %q: want DENY, PUB, SUB or PUB|SUB", s)
}

// String returns the configuration spelling of p.
func (p Perm) String() string {
	switch p {
	case Deny:
		return "DENY"
	case Pub:
		return "PUB"
	case Sub:
		return "SUB"
	case PubSub:
		return "PUB|SUB"
	}
	return fmt.Sprintf("Perm(%d)", uint8(p))
}

// allows reports whether holding p satisfies need: they share a bit, so a
// need of PubSub is met by either PUB or SUB (RocketMQ's ANY).
func (p Perm) allows(need Perm) bool { return p&need != 0 }

// need describes what a request needs, for refusals: "SUB", or "PUB or
// SUB" for a need that either satisfies.
func (p Perm) need() string {
	if p == PubSub {
		return "PUB or SUB"
	}
	return p.String()
}
