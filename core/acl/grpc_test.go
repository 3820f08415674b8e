package acl_test

import (
	"errors"
	"net/netip"
	"strings"
	"testing"

	"github.com/rmq-go/rmq/core/acl"
)

func TestCheckSigned(t *testing.T) {
	cfg, err := acl.ParseConfig([]byte(`
enabled: true
globalWhiteRemoteAddresses: [10.0.0.*]
accounts:
  - accessKey: orderApp
    secretKey: orderAppSecret
    topicPerms: [Orders=PUB]
    groupPerms: [billing=SUB]
`))
	if err != nil {
		t.Fatal(err)
	}
	c, err := acl.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	local, white := netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("10.0.0.7")
	date := "20261202T010203Z"
	good := acl.SignHex(date, "orderAppSecret")
	pub, sub := acl.TopicRes("Orders", acl.Pub), acl.TopicRes("Orders", acl.Sub)
	for _, tc := range []struct {
		name        string
		remote      netip.Addr
		ak, content string
		sig         string
		res         []acl.Resource
		want        acl.Reason // 0: allowed
	}{
		{"signed", local, "orderApp", date, good, []acl.Resource{pub}, 0},
		{"lower-case hex", local, "orderApp", date, strings.ToLower(good), []acl.Resource{pub}, 0},
		{"unsigned", local, "", date, "", nil, acl.NoAccessKey},
		{"unknown account", local, "nobody99", date, good, nil, acl.UnknownAccount},
		{"other content", local, "orderApp", "20261202T010204Z", good, nil, acl.BadSignature},
		{"not hex", local, "orderApp", date, "zz", nil, acl.BadSignature},
		{"no permission", local, "orderApp", date, good, []acl.Resource{sub}, acl.NoPermission},
		{"white-listed", white, "", date, "", []acl.Resource{sub}, 0},
	} {
		err := c.CheckSigned(tc.remote, tc.ak, tc.content, tc.sig, tc.res...)
		var d *acl.Denied
		switch {
		case tc.want == 0 && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.want != 0 && (!errors.As(err, &d) || d.Reason != tc.want || !errors.Is(err, acl.ErrDenied)):
			t.Errorf("%s: %v, want reason %d", tc.name, err, tc.want)
		}
	}
	var off *acl.Checker
	if err := off.CheckSigned(local, "", "", ""); err != nil {
		t.Fatalf("nil checker: %v", err)
	}
}
