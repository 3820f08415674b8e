package acl

import (
	"errors"
	"fmt"
	"net/netip"

	"github.com/rmq-go/rmq/core/remoting"
)

// ErrDenied marks every refusal of Check; the *Denied that wraps it says
// what was missing. The request is answered NO_PERMISSION with the
// error's text as remark; the connection survives.
var ErrDenied = errors.New("acl: denied")

// Reason is what a refused request lacked.
type Reason uint8

// Reasons of a refusal, in the order Check tests them.
const (
	NoAccessKey       Reason = iota + 1 // unsigned, from an address not globally white-listed
	UnknownAccount                      // AccessKey names no account
	AddressNotAllowed                   // the account's whiteRemoteAddress does not match
	BadSignature                        // Signature missing or wrong
	NotAdmin                            // an admin-only code from a non-admin account
	NoResource                          // a code whose resources the caller must name, named none
	NoPermission                        // the account lacks Resource.Perm on Resource
)

// Denied is a refusal: which request, from whom, and what was missing.
type Denied struct {
	Code      int16      // the request code
	AccessKey string     // the claimed account; empty for NoAccessKey
	Remote    netip.Addr // the peer's address
	Reason    Reason
	Resource  Resource // for NoPermission: the resource and the permission needed
	From      string   // for NoResource: what the caller should have named
	Call      string   // names the request instead of Code (CheckSigned: a gRPC call)
}

// Error says what was missing, in words fit for a NO_PERMISSION remark.
func (d *Denied) Error() string {
	code := remoting.RequestCode(d.Code).String()
	if d.Call != "" {
		code = d.Call
	}
	switch d.Reason {
	case NoAccessKey:
		return fmt.Sprintf("acl: %s denied: no AccessKey; the request is not signed and %s is not globally white-listed", code, d.Remote)
	case UnknownAccount:
		return fmt.Sprintf("acl: %s denied: no account %q", code, d.AccessKey)
	case AddressNotAllowed:
		return fmt.Sprintf("acl: %s denied: account %q may not be used from %s", code, d.AccessKey, d.Remote)
	case BadSignature:
		return fmt.Sprintf("acl: %s denied: bad signature for account %q", code, d.AccessKey)
	case NotAdmin:
		return fmt.Sprintf("acl: %s denied: account %q is not admin", code, d.AccessKey)
	case NoResource:
		return fmt.Sprintf("acl: %s denied for account %q: nothing to check; needs %s", code, d.AccessKey, d.From)
	case NoPermission:
		return fmt.Sprintf("acl: %s denied: account %q has no %s on %s %q", code, d.AccessKey, d.Resource.Perm.need(), d.Resource.Kind, d.Resource.Name)
	}
	return fmt.Sprintf("acl: %s denied", code)
}

// Is makes errors.Is(err, ErrDenied) true.
func (d *Denied) Is(target error) bool { return target == ErrDenied }

// Checker decides whether requests may be served. It is immutable, so one
// Checker serves every connection concurrently; a reload builds a new one
// and swaps it in.
type Checker struct {
	enabled bool
	c       *compiled
}

// New validates cfg and returns its Checker, or an error naming every
// problem of cfg. A disabled cfg is still validated, so turning it on
// cannot fail later.
func New(cfg Config) (*Checker, error) {
	c, err := compile(&cfg)
	if err != nil {
		return nil, err
	}
	return &Checker{enabled: cfg.Enabled, c: c}, nil
}

// Enabled reports whether the Checker checks anything. A nil Checker is
// disabled.
func (c *Checker) Enabled() bool { return c != nil && c.enabled }

// Check decides whether req, received from remote, may be served. It
// returns nil to serve it, or a *Denied wrapping ErrDenied saying what was
// missing. A nil or disabled Checker allows everything.
//
// The rules, in order: a globally white-listed address is allowed
// everything; otherwise req must name a configured account (AccessKey),
// come from that account's whiteRemoteAddress when it has one, carry a
// valid Signature, be a code the account may send (admin-only codes need
// an admin), and the account must hold the needed permission on every
// resource: those RequestResources finds in extFields, and extra, which
// the caller adds from the body or the store (the consumer groups and
// topics of a heartbeat or lock body, the stored topic of END_TRANSACTION
// and VIEW_MESSAGE_BY_ID). For the codes whose resources only the caller
// can know, an empty extra is refused.
//
// It does not allocate when it allows a request.
func (c *Checker) Check(remote netip.Addr, req *remoting.Command, extra ...Resource) error {
	if !c.Enabled() {
		return nil
	}
	remote = remote.Unmap()
	if matchAny(c.c.global, remote) {
		return nil
	}
	ak := req.Fields()[KeyAccessKey]
	if ak == "" {
		return &Denied{Code: req.Code, Remote: remote, Reason: NoAccessKey}
	}
	deny := func(r Reason) *Denied { return &Denied{Code: req.Code, AccessKey: ak, Remote: remote, Reason: r} }
	acc := c.c.accounts[ak]
	if acc == nil {
		return deny(UnknownAccount)
	}
	if acc.white != nil && !acc.white.match(remote) {
		return deny(AddressNotAllowed)
	}
	if !acc.signer.verify(req) {
		return deny(BadSignature)
	}
	rule := codeRules[req.Code]
	switch rule.access {
	case adminOnly:
		if !acc.admin {
			return deny(NotAdmin)
		}
	case callerResources:
		if len(extra) == 0 {
			d := deny(NoResource)
			d.From = rule.from
			return d
		}
	}
	if acc.adminAll {
		return nil
	}
	for _, f := range rule.fields {
		v := req.Fields()[f.key]
		if v == "" && f.optional {
			continue
		}
		r := GroupRes(v, f.perm)
		if f.kind == Topic {
			r = TopicRes(v, f.perm)
		}
		if !acc.holds(r) {
			d := deny(NoPermission)
			d.Resource = r
			return d
		}
	}
	for _, r := range extra {
		if !acc.holds(r) {
			d := deny(NoPermission)
			d.Resource = r
			return d
		}
	}
	return nil
}

// holds reports whether the account holds r.Perm on r: its per-resource
// permission when it has one, else its default for r's kind.
func (a *account) holds(r Resource) bool {
	var perms map[string]Perm
	var def Perm
	switch r.Kind {
	case Topic:
		perms, def = a.topics, a.topic
	case Group:
		perms, def = a.groups, a.group
	default:
		return false // a caller's zero Resource names nothing it could hold
	}
	if p, ok := perms[r.Name]; ok {
		return p.allows(r.Perm)
	}
	return def.allows(r.Perm)
}
