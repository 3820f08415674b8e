package acl

import (
	"crypto/hmac"
	"crypto/sha1"
	"crypto/subtle"
	"encoding/base64"
	"hash"
	"runtime"
	"slices"

	"github.com/rmq-go/rmq/core/remoting"
)

// ExtFields keys of the plain-ACL signature, as RocketMQ's clients write
// them (SessionCredentials in Java, internal/remote/interceptor.go in the
// Go client).
const (
	// KeyAccessKey names the account a request claims to come from.
	KeyAccessKey = "AccessKey"
	// KeySignature is base64(HMAC-SHA1(secretKey, content)); see Sign.
	KeySignature = "Signature"
	// KeySecurityToken is an optional token the plain ACL carries but does
	// not check.
	KeySecurityToken = "SecurityToken"
	// keyUniqueQuery is MixAll.UNIQUE_MSG_QUERY_FLAG: old Java clients add
	// it after signing, so RocketMQ's broker leaves it out of the content.
	keyUniqueQuery = "_UNIQUE_KEY_QUERY"
)

// sigLen is the length of an HMAC-SHA1 digest, sigText that of its
// base64 text.
const (
	sigLen  = sha1.Size
	sigText = (sigLen + 2) / 3 * 4
)

// Signature returns the plain-ACL signature of req under secret:
// base64.StdEncoding(HMAC-SHA1(secret, content)), where content is the
// values of req's extFields other than Signature and _UNIQUE_KEY_QUERY,
// in the byte order of their keys, concatenated with no separator and
// followed by the body. AccessKey and SecurityToken, when present, are
// extFields like any other.
func Signature(req *remoting.Command, secret string) string {
	var s signer
	s.init(secret)
	var sum [sigLen]byte
	s.sum(req, false, sum[:0])
	return base64.StdEncoding.EncodeToString(sum[:])
}

// Sign sets req's AccessKey (and SecurityToken when token is not empty) and
// then its Signature under secret, as RocketMQ's Java client does
// (AclClientRPCHook). It is for tests and tools; a broker only verifies.
func Sign(req *remoting.Command, accessKey, secret, token string) {
	req.Set(KeyAccessKey, accessKey)
	if token != "" {
		req.Set(KeySecurityToken, token)
	}
	delete(req.Fields(), KeySignature)
	req.Set(KeySignature, Signature(req, secret))
}

// Verify reports whether req carries a valid signature under secret. A
// missing, malformed or wrong signature is false; so is an empty secret,
// which no account may have. It compares in constant time.
//
// The official Go client leaves SecurityToken out of what it signs (it
// puts the token in its value map but not in its key list), while the
// Java client and RocketMQ's broker include it. Verify accepts either
// form, since the plain ACL never checks the token's value: leaving it out
// of the MAC grants nothing the token could have withheld.
func Verify(req *remoting.Command, secret string) bool {
	if secret == "" {
		return false
	}
	var s signer
	s.init(secret)
	return s.verify(req)
}

// signer computes signatures under one secret. It keeps the keyed HMAC
// state and a scratch buffer, so a pooled signer verifies without
// allocating.
type signer struct {
	secret string
	mac    hash.Hash
	keys   []string
	buf    []byte
	out    [sigLen]byte // the MAC; here, not on the stack, because hash.Hash.Sum makes its argument escape
}

func (s *signer) init(secret string) {
	s.secret = secret
	s.mac = hmac.New(sha1.New, []byte(secret))
}

// sum appends the MAC of req's content to dst. With noToken, SecurityToken
// is left out, as the Go client does.
func (s *signer) sum(req *remoting.Command, noToken bool, dst []byte) []byte {
	s.keys = s.keys[:0]
	for k := range req.Fields() {
		switch {
		case k == KeySignature, k == keyUniqueQuery:
		case noToken && k == KeySecurityToken:
		default:
			s.keys = append(s.keys, k)
		}
	}
	slices.Sort(s.keys)
	s.buf = s.buf[:0]
	for _, k := range s.keys {
		s.buf = append(s.buf, req.Fields()[k]...)
	}
	s.mac.Reset()
	s.mac.Write(s.buf)
	s.mac.Write(req.Body)
	clear(s.keys) // drop references to the request's strings
	if cap(s.buf) > 64<<10 {
		s.buf = nil // do not pin one huge header in the pool
	}
	return s.mac.Sum(dst)
}

// verify compares the text of req's Signature with the expected one, as
// RocketMQ's broker compares strings: only the canonical base64 of the
// right MAC passes, never a variant the decoder would also accept (line
// breaks, non-zero padding bits).
func (s *signer) verify(req *remoting.Command) bool {
	got := req.Fields()[KeySignature]
	if len(got) != sigText {
		return false
	}
	var want [sigText]byte
	base64.StdEncoding.Encode(want[:], s.sum(req, false, s.out[:0]))
	if subtle.ConstantTimeCompare(want[:], []byte(got)) == 1 {
		return true
	}
	if _, ok := req.Fields()[KeySecurityToken]; !ok {
		return false
	}
	base64.StdEncoding.Encode(want[:], s.sum(req, true, s.out[:0]))
	return subtle.ConstantTimeCompare(want[:], []byte(got)) == 1
}

// signerPool keeps the idle signers of one secret; each account has one.
// It is a buffered channel rather than a sync.Pool so that a warm pool
// never allocates, which the race detector's random sync.Pool drops would
// make untestable; signers beyond its capacity are left to the GC.
type signerPool struct {
	secret string
	idle   chan *signer
}

func newSignerPool(secret string) *signerPool {
	return &signerPool{secret: secret, idle: make(chan *signer, 2*runtime.GOMAXPROCS(0))}
}

// verify is Verify with a pooled signer: it does not allocate once warm.
func (p *signerPool) verify(req *remoting.Command) bool {
	if p.secret == "" {
		return false
	}
	var s *signer
	select {
	case s = <-p.idle:
	default:
		s = new(signer)
		s.init(p.secret)
	}
	ok := s.verify(req)
	select {
	case p.idle <- s:
	default:
	}
	return ok
}
