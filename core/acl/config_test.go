package acl_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/rmq-go/rmq/core/acl"
)

// rocketmqSample is RocketMQ 4.9's distributed plain_acl.yml, with a
// dataVersion block as its broker writes one.
const rocketmqSample = `
globalWhiteRemoteAddresses:
  - 10.10.103.*
  - 192.168.0.*

accounts:
  - accessKey: RocketMQ
    secretKey: 12345678
    whiteRemoteAddress:
    admin: false
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms:
      - topicA=DENY
      - topicB=PUB|SUB
      - topicC=SUB
    groupPerms:
      # the group should convert to retry topic
      - groupA=DENY
      - groupB=PUB|SUB
      - groupC=SUB

  - accessKey: rocketmq2
    secretKey: 12345678
    whiteRemoteAddress: 192.168.1.*
    # if it is admin, it could access all resources
    admin: true
dataVersion:
  - counter: 1
    timestamp: 1600000000000
`

func TestParseRocketMQSample(t *testing.T) {
	cfg, err := acl.ParseConfig([]byte("enabled: true\n" + rocketmqSample))
	if err != nil {
		t.Fatal(err)
	}
	if !cfg.Enabled || len(cfg.GlobalWhiteRemoteAddresses) != 2 || len(cfg.Accounts) != 2 {
		t.Fatalf("parsed %+v", cfg)
	}
	a := cfg.Accounts[0]
	if a.AccessKey != "RocketMQ" || a.SecretKey != "12345678" || a.DefaultGroupPerm != "SUB" || len(a.TopicPerms) != 3 || a.GroupPerms[1] != "groupB=PUB|SUB" {
		t.Fatalf("account 0: %+v", a)
	}
	if !cfg.Accounts[1].Admin || cfg.Accounts[1].WhiteRemoteAddress != "192.168.1.*" {
		t.Fatalf("account 1: %+v", cfg.Accounts[1])
	}
	if _, err := acl.New(cfg); err != nil {
		t.Fatal(err)
	}
}

func TestParseEmptyIsDisabled(t *testing.T) {
	for _, doc := range []string{"", "enabled: false\n", "# nothing\n"} {
		cfg, err := acl.ParseConfig([]byte(doc))
		if err != nil || cfg.Enabled {
			t.Errorf("%q: %+v, %v", doc, cfg, err)
		}
	}
}

func TestParseRefusesUnknownKeys(t *testing.T) {
	_, err := acl.ParseConfig([]byte(`
enabled: true
globalWhiteAddresses: [1.2.3.4]
accounts:
  - accessKey: RocketMQ
    secretkey: 12345678
    admin: true
`))
	if err == nil {
		t.Fatal("unknown keys accepted")
	}
	for _, want := range []string{`line 3: unknown key "globalWhiteAddresses"`, `line 6: unknown key "secretkey"`, "secretKey is empty"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not name %q:\n%v", want, err)
		}
	}
}

// TestValidateReportsEverything: one config with one of each problem; the
// error names each, so an operator fixes the file in one pass.
func TestValidateReportsEverything(t *testing.T) {
	_, err := acl.ParseConfig([]byte(`
enabled: true
globalWhiteRemoteAddresses: ["10.0.0.300", "10.0.0.0/33", "fe80::*", ""]
accounts:
  - accessKey: ""
    secretKey: "longenough"
  - accessKey: shorty
    secretKey: "tiny"
  - accessKey: producer1
    secretKey: ""
    whiteRemoteAddress: 192.168.1.100-1
    defaultTopicPerm: READ
    defaultGroupPerm: "sub"
    topicPerms: ["Orders=PUB|SUB", "Orders=SUB", "Audit", "=PUB", "X=PUBSUB"]
    groupPerms: ["g1=SUB", "%RETRY%g1=DENY"]
  - accessKey: producer1
    secretKey: "has a\ttab"
`))
	if err == nil {
		t.Fatal("accepted")
	}
	for _, want := range []string{
		`globalWhiteRemoteAddresses[0]: address pattern "10.0.0.300"`,
		`globalWhiteRemoteAddresses[1]: address pattern "10.0.0.0/33"`,
		`globalWhiteRemoteAddresses[2]: address pattern "fe80::*": not an IPv6 address; write IPv6 ranges as CIDR`,
		`globalWhiteRemoteAddresses[3]: empty address pattern`,
		`accounts[0]: accessKey is empty`,
		`accounts[1] ("shorty"): accessKey must be longer than 6`,
		`accounts[1] ("shorty"): secretKey must be longer than 6`,
		`accounts[2] ("producer1"): secretKey is empty`,
		`accounts[2] ("producer1"): whiteRemoteAddress: address pattern "192.168.1.100-1": octet 4: range "100-1" runs backwards`,
		`accounts[2] ("producer1"): defaultTopicPerm: permission "READ"`,
		`accounts[2] ("producer1"): defaultGroupPerm: permission "sub"`,
		`accounts[2] ("producer1"): topicPerms[1]: "Orders" is listed twice`,
		`accounts[2] ("producer1"): topicPerms[2]: "Audit" is not name=PERM`,
		`accounts[2] ("producer1"): topicPerms[3]: "=PUB" names nothing`,
		`accounts[2] ("producer1"): topicPerms[4]: permission "PUBSUB"`,
		`accounts[2] ("producer1"): groupPerms[1]: "g1" is listed twice`,
		`accounts[3] ("producer1"): secretKey holds a control character`,
		`accounts[3] ("producer1"): accessKey is used by an earlier account too`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q", want)
		}
	}
	if t.Failed() {
		t.Logf("error:\n%v", err)
	}
	if errors.Is(err, acl.ErrDenied) {
		t.Error("a config error is a refusal")
	}
}

func TestNewValidates(t *testing.T) {
	_, err := acl.New(acl.Config{Accounts: []acl.Account{{AccessKey: "abcdefg", SecretKey: "x"}}})
	if err == nil || !strings.Contains(err.Error(), "secretKey must be longer than 6") {
		t.Fatalf("New: %v", err)
	}
}

func TestParsePerm(t *testing.T) {
	for s, want := range map[string]acl.Perm{"DENY": acl.Deny, "PUB": acl.Pub, "SUB": acl.Sub, "PUB|SUB": acl.PubSub, "SUB|PUB": acl.PubSub, "ANY": acl.PubSub} {
		got, err := acl.ParsePerm(s)
		if err != nil || got != want {
			t.Errorf("ParsePerm(%q) = %v, %v; want %v", s, got, err, want)
		}
	}
	for _, s := range []string{"", "pub", "PUB|", "PUB|SUB|DENY", "READ"} {
		if _, err := acl.ParsePerm(s); err == nil {
			t.Errorf("ParsePerm(%q) accepted", s)
		}
	}
}

// FuzzParseConfig: parsing never panics, and a document that parses
// without error builds a Checker.
func FuzzParseConfig(f *testing.F) {
	f.Add([]byte(rocketmqSample))
	f.Add([]byte(testACL))
	f.Add([]byte("enabled: true\nglobalWhiteRemoteAddresses: [\"1.2.3.{1,2}\", \"::1/128\"]\n"))
	f.Add([]byte("accounts: [{accessKey: abcdefg, secretKey: hijklmn, topicPerms: [a=b=PUB]}]\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := acl.ParseConfig(data)
		if err != nil {
			return
		}
		if _, err := acl.New(cfg); err != nil {
			t.Fatalf("parsed without error, New refuses: %v", err)
		}
	})
}
