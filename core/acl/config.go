package acl

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode"

	"go.yaml.in/yaml/v3"
)

// Config is the plain ACL, with the field names of RocketMQ's
// plain_acl.yml so an operator's file carries over. The zero value is a
// disabled ACL.
type Config struct {
	// Enabled turns checking on. Off, every request is allowed.
	Enabled bool `yaml:"enabled"`
	// GlobalWhiteRemoteAddresses are address patterns (see doc.go) whose
	// requests are allowed without an account or a signature, for every
	// request code, as RocketMQ allows them.
	GlobalWhiteRemoteAddresses []string `yaml:"globalWhiteRemoteAddresses"`
	// Accounts are the access keys that may sign requests.
	Accounts []Account `yaml:"accounts"`
}

// Account is one access key and what it may do.
type Account struct {
	// AccessKey names the account; requests carry it as AccessKey. Longer
	// than 6 characters, as RocketMQ requires, and unique.
	AccessKey string `yaml:"accessKey"`
	// SecretKey is the HMAC key of the account's signatures. Longer than
	// 6 characters, as RocketMQ requires, without control characters.
	SecretKey string `yaml:"secretKey"`
	// WhiteRemoteAddress, when set, is the one address pattern the account
	// may be used from. Empty: any address. Unlike RocketMQ, where a match
	// skips the signature and permission checks, a match here is required
	// and skips nothing (see doc.go).
	WhiteRemoteAddress string `yaml:"whiteRemoteAddress"`
	// Admin allows the admin-only request codes. An admin account with no
	// TopicPerms and no GroupPerms also holds PUB|SUB on every topic and
	// group, as in RocketMQ.
	Admin bool `yaml:"admin"`
	// DefaultTopicPerm applies to topics not in TopicPerms; empty means
	// DENY, as in RocketMQ.
	DefaultTopicPerm string `yaml:"defaultTopicPerm"`
	// DefaultGroupPerm applies to groups not in GroupPerms; empty means
	// DENY.
	DefaultGroupPerm string `yaml:"defaultGroupPerm"`
	// TopicPerms are per-topic permissions, "name=PERM", such as
	// "Orders=PUB|SUB" or "Audit=DENY". They replace the default.
	TopicPerms []string `yaml:"topicPerms"`
	// GroupPerms are per-consumer-group permissions, "name=PERM".
	GroupPerms []string `yaml:"groupPerms"`
}

// ParseConfig reads a plain_acl.yml document (or the acl: section of the
// broker's file) strictly: a key that is not a Config or Account field is
// an error naming it. RocketMQ's dataVersion block, which its broker
// writes into the file, is accepted and ignored. The result is validated
// too; every problem, of either kind, is reported at once.
func ParseConfig(data []byte) (Config, error) {
	var doc struct {
		Config      `yaml:",inline"`
		DataVersion yaml.Node `yaml:"dataVersion"` // RocketMQ's bookkeeping; ignored
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	var errs []error
	if err := dec.Decode(&doc); err != nil && !errors.Is(err, io.EOF) { // EOF: an empty document
		var te *yaml.TypeError
		if !errors.As(err, &te) {
			return Config{}, fmt.Errorf("acl: config: %w", err)
		}
		for _, e := range te.Errors {
			errs = append(errs, fmt.Errorf("acl: config: %s", unknownKey(e)))
		}
	}
	if err := doc.Config.Validate(); err != nil {
		errs = append(errs, err)
	}
	return doc.Config, errors.Join(errs...)
}

// unknownKey rewrites yaml's "line 3: field x not found in type T" as
// "line 3: unknown key "x"", naming the key and not Go's types.
func unknownKey(e string) string {
	line, rest, ok := strings.Cut(e, ": field ")
	if !ok {
		return e
	}
	key, _, ok := strings.Cut(rest, " not found in type ")
	if !ok {
		return e
	}
	return fmt.Sprintf("%s: unknown key %q", line, key)
}

// Validate reports every problem of c at once: short or missing keys,
// secrets with control characters, duplicate access keys, bad permission
// strings or entries, and bad address patterns. Each problem names the
// account (by position and access key) and the field.
func (c *Config) Validate() error {
	_, err := compile(c)
	return err
}

// compiled is a validated Config, ready for checking.
type compiled struct {
	global   []addrPattern
	accounts map[string]*account
}

// account is a validated Account.
type account struct {
	key      string
	signer   *signerPool
	white    *addrPattern // nil: any address
	admin    bool
	adminAll bool // admin with no per-resource perms: everything, as RocketMQ
	topic    Perm // default
	group    Perm // default
	topics   map[string]Perm
	groups   map[string]Perm
}

func compile(c *Config) (*compiled, error) {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf("acl: "+format, args...)) }
	out := &compiled{accounts: make(map[string]*account, len(c.Accounts))}
	for i, s := range c.GlobalWhiteRemoteAddresses {
		p, err := parseAddrPattern(s)
		if err != nil {
			bad("globalWhiteRemoteAddresses[%d]: %v", i, err)
			continue
		}
		out.global = append(out.global, p)
	}
	for i := range c.Accounts {
		a := &c.Accounts[i]
		where := fmt.Sprintf("accounts[%d]", i)
		if a.AccessKey != "" {
			where += fmt.Sprintf(" (%q)", a.AccessKey)
		}
		acc := &account{key: a.AccessKey, admin: a.Admin}
		switch {
		case a.AccessKey == "":
			bad("%s: accessKey is empty", where)
		case len(a.AccessKey) <= 6:
			bad("%s: accessKey must be longer than 6 characters, as RocketMQ requires", where)
		case hasControl(a.AccessKey):
			bad("%s: accessKey holds a control character", where)
		}
		switch {
		case a.SecretKey == "":
			bad("%s: secretKey is empty", where)
		case len(a.SecretKey) <= 6:
			bad("%s: secretKey must be longer than 6 characters, as RocketMQ requires", where)
		case hasControl(a.SecretKey):
			bad("%s: secretKey holds a control character", where)
		}
		if _, dup := out.accounts[a.AccessKey]; dup && a.AccessKey != "" {
			bad("%s: accessKey is used by an earlier account too", where)
		}
		if a.WhiteRemoteAddress != "" {
			p, err := parseAddrPattern(a.WhiteRemoteAddress)
			if err != nil {
				bad("%s: whiteRemoteAddress: %v", where, err)
			}
			acc.white = &p
		}
		var err error
		if acc.topic, err = defaultPerm(a.DefaultTopicPerm); err != nil {
			bad("%s: defaultTopicPerm: %v", where, err)
		}
		if acc.group, err = defaultPerm(a.DefaultGroupPerm); err != nil {
			bad("%s: defaultGroupPerm: %v", where, err)
		}
		acc.topics = resourcePerms(a.TopicPerms, false, where+": topicPerms", bad)
		acc.groups = resourcePerms(a.GroupPerms, true, where+": groupPerms", bad)
		acc.adminAll = a.Admin && len(a.TopicPerms) == 0 && len(a.GroupPerms) == 0
		acc.signer = newSignerPool(a.SecretKey)
		if _, dup := out.accounts[a.AccessKey]; !dup {
			out.accounts[a.AccessKey] = acc
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return out, nil
}

func defaultPerm(s string) (Perm, error) {
	if s == "" {
		return Deny, nil
	}
	return ParsePerm(s)
}

// resourcePerms parses "name=PERM" entries. A group may be written with
// its %RETRY% prefix, as RocketMQ stores it.
func resourcePerms(entries []string, group bool, where string, bad func(string, ...any)) map[string]Perm {
	if len(entries) == 0 {
		return nil
	}
	m := make(map[string]Perm, len(entries))
	for i, e := range entries {
		eq := strings.LastIndexByte(e, '=')
		if eq < 0 {
			bad("%s[%d]: %q is not name=PERM", where, i, e)
			continue
		}
		name, perm := strings.TrimSpace(e[:eq]), strings.TrimSpace(e[eq+1:])
		if group {
			name = strings.TrimPrefix(name, retryPrefix)
		}
		if name == "" {
			bad("%s[%d]: %q names nothing", where, i, e)
			continue
		}
		p, err := ParsePerm(perm)
		if err != nil {
			bad("%s[%d]: %v", where, i, err)
			continue
		}
		if _, dup := m[name]; dup {
			bad("%s[%d]: %q is listed twice", where, i, name)
			continue
		}
		m[name] = p
	}
	return m
}

func hasControl(s string) bool {
	return strings.ContainsFunc(s, unicode.IsControl)
}
