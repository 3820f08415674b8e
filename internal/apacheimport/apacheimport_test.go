package apacheimport_test

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/rmq-go/rmq/internal/apacheimport"
)

func readFixture(t *testing.T) *apacheimport.Source {
	t.Helper()
	src, err := apacheimport.ReadDir("testdata/apache5", "testdata/apache5/broker.conf")
	if err != nil {
		t.Fatal(err)
	}
	return src
}

func TestReadDirFixture(t *testing.T) {
	src := readFixture(t)
	if src.Dir != filepath.Join("testdata/apache5", "config") {
		t.Errorf("Dir = %s, want the config directory under the store root", src.Dir)
	}
	if n := len(src.Topics.TopicConfigTable); n != 22 {
		t.Errorf("%d topics, want 22", n)
	}
	tt := src.Topics.TopicConfigTable["TopicTest"]
	if tt.ReadQueueNums != 4 || tt.WriteQueueNums != 4 || tt.Perm != 6 || tt.TopicFilterType != "SINGLE_TAG" {
		t.Errorf("TopicTest = %+v", tt)
	}
	if src.Topics.DataVersion.Counter != 27 {
		t.Errorf("dataVersion = %+v", src.Topics.DataVersion)
	}
	g := src.Groups.SubscriptionGroupTable["GID_orders"]
	if *g.ConsumeBroadcastEnable || *g.RetryMaxTimes != 5 || g.GroupRetryPolicy.Type != "EXPONENTIAL" || g.GroupRetryPolicy.ExponentialRetryPolicy.Initial != 1000 {
		t.Errorf("GID_orders = %+v", g)
	}
	// fastjson's bare integer keys.
	if got := src.Offsets.OffsetTable["TopicTest@please_rename_unique_group_name_4"]; got[0] != 250 || got[1] != 2 || len(got) != 4 {
		t.Errorf("TopicTest offsets = %v", got)
	}
	if got := src.DelayOffsets.OffsetTable; got[1] != 16 || got[5] != 1 || len(got) != 4 {
		t.Errorf("delay offsets = %v", got)
	}
	if len(src.Notes) != 0 {
		t.Errorf("notes: %q", src.Notes)
	}
}

func TestPlanFixture(t *testing.T) {
	p := apacheimport.NewPlan(readFixture(t))
	var topics []string
	for _, s := range p.Topics {
		topics = append(topics, s.Config.TopicName)
	}
	if want := []string{"OrderTopic", "TopicBatch", "TopicFifo", "TopicTest"}; !slices.Equal(topics, want) {
		t.Errorf("topics %q, want %q", topics, want)
	}
	for _, s := range p.Topics {
		if s.Config.TopicName == "TopicFifo" && s.MessageType != "FIFO" {
			t.Errorf("TopicFifo's message type %q", s.MessageType)
		}
	}
	var groups []string
	for _, s := range p.Groups {
		groups = append(groups, s.Config.GroupName)
	}
	if want := []string{"GID_fifo", "GID_orders", "please_rename_unique_group_name_4"}; !slices.Equal(groups, want) {
		t.Errorf("groups %q, want %q", groups, want)
	}
	skipped := map[string]string{}
	for _, s := range p.Skipped {
		skipped[s.Kind+" "+s.Name] = s.Reason
	}
	for _, name := range []string{"topic TBW102", "topic SCHEDULE_TOPIC_XXXX", "topic DefaultCluster", "topic broker-a", "topic SELF_TEST_TOPIC",
		"topic %RETRY%GID_orders", "topic %DLQ%GID_orders", "topic rmq_sys_REVIVE_LOG_DefaultCluster", "topic DefaultCluster_REPLY_TOPIC",
		"group TOOLS_CONSUMER", "group CID_ONSAPI_PULL", "group CID_RMQ_SYS_TRANS", "attribute TopicBatch queue.type=BatchCQ",
		"offsets %RETRY%GID_orders@GID_orders", "offsets SCHEDULE_TOPIC_XXXX@SCHEDULE_CONSUMER", "offsets TopicGone@GID_orders",
		"offsets TopicTest@GID_orders queue 7", "offsets RMQ_SYS_TRACE_TOPIC@TOOLS_CONSUMER", "delay offsets 4 levels"} {
		if skipped[name] == "" {
			t.Errorf("%s not skipped", name)
		}
	}
	n := 0
	for _, o := range p.Offsets {
		if o.Topic == "TopicTest" && o.Group == "please_rename_unique_group_name_4" && o.QueueID == 1 && o.Offset != 2 {
			t.Errorf("offset %+v", o)
		}
		n++
	}
	if n != 8+4+4+4 {
		t.Errorf("%d offsets, want 20", n)
	}
}

func TestMapBrokerConf(t *testing.T) {
	c := readFixture(t)
	conf := apacheimport.MapBrokerConf(c.BrokerConf)
	mapped := map[string]any{}
	for _, m := range conf.Mapped {
		mapped[m.To] = m.ToValue
	}
	want := map[string]any{
		"clusterName": "DefaultCluster", "brokerName": "broker-a", "store.retention": "48h", "store.flush": "async",
		"listen": "0.0.0.0:10911", "store.segmentSize": "1GiB", "store.diskHighWater": 0.8, "maxMessageSize": "4MiB",
		"autoCreateTopic": false, "autoCreateSubscriptionGroup": true, "acl.enabled": true, "txnCheckMax": 10,
		"delayLevels": "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h",
	}
	for k, v := range want {
		if got, ok := mapped[k]; !ok || got != v {
			t.Errorf("%s = %#v, want %#v", k, got, v)
		}
	}
	if ns, _ := mapped["namesrv"].([]string); !slices.Equal(ns, []string{"127.0.0.1:9876", "10.0.0.2:9876"}) {
		t.Errorf("namesrv = %q", ns)
	}
	unmapped := map[string]string{}
	for _, u := range conf.Unmapped {
		key, _, _ := strings.Cut(u.Name, "=")
		unmapped[key] = u.Reason
	}
	for _, k := range []string{"brokerId", "brokerRole", "deleteWhen", "storePathRootDir", "storePathCommitLog", "sendMessageThreadPoolNums"} {
		if unmapped[k] == "" {
			t.Errorf("%s is not listed as unmapped", k)
		}
	}
	y, err := conf.YAML("broker.conf")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{"clusterName: DefaultCluster", "  flush: async", "namesrv: ['127.0.0.1:9876', '10.0.0.2:9876']", "  enabled: true", "# from fileReservedTime=48"} {
		if !strings.Contains(string(y), line+"\n") {
			t.Errorf("YAML lacks %q:\n%s", line, y)
		}
	}
}

func TestBrokerConfBadValues(t *testing.T) {
	props, err := apacheimport.DecodeProperties([]byte("listenPort=x\nflushDiskType=SOMETIMES\ndiskMaxUsedSpaceRatio=120\nbrokerRole=SLAVE\n"))
	if err != nil {
		t.Fatal(err)
	}
	c := apacheimport.MapBrokerConf(props)
	if len(c.Mapped) != 0 || len(c.Unmapped) != 4 || len(c.Attention) != 1 {
		t.Errorf("mapped %v, unmapped %v, attention %q", c.Mapped, c.Unmapped, c.Attention)
	}
}

func TestDecodeProperties(t *testing.T) {
	in := "# comment\n! also\n  a = 1\nb:2\nc 3\nd=x\\\n   y\\\\\ne=\\u0041\\t\na=last\r\nf\n"
	props, err := apacheimport.DecodeProperties([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	var keys []string
	for _, p := range props {
		got[p.Key] = p.Value
		keys = append(keys, p.Key)
	}
	want := map[string]string{"a": "last", "b": "2", "c": "3", "d": "xy\\", "e": "A\t", "f": ""}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %q, want %q", k, got[k], v)
		}
	}
	if !slices.Equal(keys, []string{"b", "c", "d", "e", "a", "f"}) {
		t.Errorf("order %q", keys)
	}
	if _, err := apacheimport.DecodeProperties([]byte("a=\\u00zz\n")); !errors.Is(err, apacheimport.ErrSyntax) {
		t.Errorf("bad escape: %v", err)
	}
	latin1, err := apacheimport.DecodeProperties([]byte("brokerName=caf\xe9\n"))
	if err != nil || latin1[0].Value != "café" {
		t.Errorf("ISO-8859-1: %v %v", err, latin1)
	}
}

func TestDecodeErrors(t *testing.T) {
	for _, in := range []string{`{"topicConfigTable":`, `{"offsetTable":{"t@g":{0:"x"}}}`, `{"offsetTable":{"t@g":{x`, `[1,2`, `"abc`} {
		if _, err := apacheimport.DecodeOffsets([]byte(in)); !errors.Is(err, apacheimport.ErrSyntax) {
			t.Errorf("%q: %v, want ErrSyntax", in, err)
		}
	}
	// A 4.x file: no dataVersion.
	o, err := apacheimport.DecodeOffsets([]byte("{\"offsetTable\":{\"a@b\":{0:1,1:2}}}"))
	if err != nil || o.OffsetTable["a@b"][1] != 2 {
		t.Errorf("%v %v", o, err)
	}
}

func TestReadDirUnreadable(t *testing.T) {
	dir := t.TempDir()
	if _, err := apacheimport.ReadDir(dir, ""); !errors.Is(err, apacheimport.ErrNoInput) {
		t.Errorf("empty directory: %v", err)
	}
	os.WriteFile(filepath.Join(dir, apacheimport.TopicsFile), []byte(`{"topicConfigTable":{"a":{"readQueueNums":"four"}}}`), 0o644)
	if _, err := apacheimport.ReadDir(dir, ""); !errors.Is(err, apacheimport.ErrSyntax) {
		t.Errorf("bad topics.json: %v", err)
	}
	// A missing file with Apache's .bak copy is read from the copy.
	os.Remove(filepath.Join(dir, apacheimport.TopicsFile))
	os.WriteFile(filepath.Join(dir, apacheimport.TopicsFile+".bak"), []byte(`{"topicConfigTable":{"a":{"readQueueNums":4,"writeQueueNums":4,"perm":6}}}`), 0o644)
	src, err := apacheimport.ReadDir(dir, "")
	if err != nil || src.Topics.TopicConfigTable["a"].TopicName != "a" || len(src.Notes) != 4 {
		t.Errorf("%v, notes %q", err, src.Notes)
	}
	if _, err := apacheimport.ReadDir(dir, filepath.Join(dir, "missing.conf")); err == nil {
		t.Error("a missing broker.conf is not an error")
	}
}
