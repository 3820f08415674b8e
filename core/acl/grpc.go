package acl

import (
	"crypto/hmac"
	"crypto/sha1"
	"encoding/hex"
	"net/netip"
	"strings"
)

// CheckSigned decides a request of RocketMQ 5's gRPC protocol, whose
// signature covers one header instead of a remoting command: the
// authorization metadata "MQv2-HMAC-SHA1 Credential=AK, SignedHeaders=
// x-mq-date-time, Signature=HEX" carries accessKey and signature, the
// hexadecimal HMAC-SHA1 of content (the x-mq-date-time value) under the
// account's secret. The rules are Check's without request codes: a
// globally white-listed address is allowed everything; otherwise the
// account must exist, match its whiteRemoteAddress, have signed content,
// and hold every resource (an admin with no per-resource permissions
// holds all). It returns nil or a *Denied; a nil or disabled Checker
// allows everything.
func (c *Checker) CheckSigned(remote netip.Addr, accessKey, content, signature string, resources ...Resource) error {
	if !c.Enabled() {
		return nil
	}
	remote = remote.Unmap()
	if matchAny(c.c.global, remote) {
		return nil
	}
	if accessKey == "" {
		return &Denied{Remote: remote, Reason: NoAccessKey, Call: "gRPC request"}
	}
	deny := func(r Reason) *Denied {
		return &Denied{AccessKey: accessKey, Remote: remote, Reason: r, Call: "gRPC request"}
	}
	acc := c.c.accounts[accessKey]
	if acc == nil {
		return deny(UnknownAccount)
	}
	if acc.white != nil && !acc.white.match(remote) {
		return deny(AddressNotAllowed)
	}
	if !VerifyHex(content, signature, acc.signer.secret) {
		return deny(BadSignature)
	}
	if acc.adminAll {
		return nil
	}
	for _, r := range resources {
		if !acc.holds(r) {
			d := deny(NoPermission)
			d.Resource = r
			return d
		}
	}
	return nil
}

// SignHex returns the hexadecimal HMAC-SHA1 of content under secret, the
// signature of RocketMQ 5's gRPC clients. It is for tests and tools.
func SignHex(content, secret string) string {
	m := hmac.New(sha1.New, []byte(secret))
	m.Write([]byte(content))
	return strings.ToUpper(hex.EncodeToString(m.Sum(nil)))
}

// VerifyHex reports whether signature is SignHex(content, secret), in
// either letter case, comparing in constant time. An empty secret never
// verifies.
func VerifyHex(content, signature, secret string) bool {
	if secret == "" {
		return false
	}
	got, err := hex.DecodeString(signature)
	if err != nil {
		return false
	}
	m := hmac.New(sha1.New, []byte(secret))
	m.Write([]byte(content))
	return hmac.Equal(got, m.Sum(nil))
}
