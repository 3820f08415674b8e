package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/pflag"

	"github.com/rmq-go/rmq/core/broker"
	"github.com/rmq-go/rmq/core/remoting"
	"github.com/rmq-go/rmq/internal/apacheimport"
)

const importUsage = `Usage: broker import --from DIR [--broker-conf FILE] [--out FILE] [--broker ADDR] [--dry-run]

Bring an Apache RocketMQ broker's topics, consumer groups and consumer
offsets (the files of its ${storePathRootDir}/config: topics.json,
subscriptionGroup.json, consumerOffset.json, delayOffset.json) into a
running broker through its remoting API, and map its broker.conf onto this
broker's config file. Messages are not migrated. Apache's own topics and
groups are skipped; every line of the report says what was done or why not.

Flags:
`

// runImport runs "broker import". It reads and plans everything before it
// changes anything; a file it cannot read or decode exits 1 with nothing
// applied. Steps the broker refuses are reported and the rest go on; the
// exit status is then 1.
func runImport(args []string, stdout, stderr io.Writer) int {
	fs := pflag.NewFlagSet("broker import", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		from       = fs.String("from", "", "an Apache broker's config directory, or its store root holding config/ (required)")
		brokerConf = fs.String("broker-conf", "", "the Apache broker's broker.conf, to map onto this broker's config")
		out        = fs.String("out", "", "write the mapped config to this YAML file (needs --broker-conf)")
		addr       = fs.String("broker", "127.0.0.1:10911", `the running broker to create the topics and groups on and set the offsets of; "" for none (only --out is written)`)
		dryRun     = fs.Bool("dry-run", false, "print the plan; change nothing and write nothing, and do not contact the broker")
		timeout    = fs.Duration("timeout", 5*time.Minute, "give up after this long")
		ak         = fs.String("access-key", os.Getenv("RMQ_ACCESS_KEY"), "an admin account's access key, when the broker checks access (env RMQ_ACCESS_KEY)")
		sk         = fs.String("secret-key", "", "that account's secret key (default: env RMQ_SECRET_KEY)")
	)
	fs.Usage = func() { fmt.Fprintf(stderr, "%s%s", importUsage, fs.FlagUsages()) }
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return 0
		}
		fmt.Fprintln(stderr, err)
		return 2
	}
	switch {
	case fs.NArg() > 0:
		fmt.Fprintf(stderr, "broker import: unexpected argument %q\n", fs.Arg(0))
		return 2
	case *from == "":
		fmt.Fprintln(stderr, "broker import: --from required")
		return 2
	case *out != "" && *brokerConf == "":
		fmt.Fprintln(stderr, "broker import: --out needs --broker-conf")
		return 2
	case *addr == "" && *out == "" && !*dryRun:
		fmt.Fprintln(stderr, `broker import: --broker "" has nothing to do without --out`)
		return 2
	}
	src, err := apacheimport.ReadDir(*from, *brokerConf)
	if err != nil {
		fmt.Fprintf(stderr, "broker import: %v\nnothing was imported\n", err)
		return 1
	}
	plan := apacheimport.NewPlan(src)
	fmt.Fprintf(stdout, "Importing from %s", src.Dir)
	if *brokerConf != "" {
		fmt.Fprintf(stdout, " and %s", *brokerConf)
	}
	if *dryRun {
		fmt.Fprint(stdout, " (dry run: nothing is changed)")
	}
	fmt.Fprintln(stdout)
	for _, n := range plan.Notes {
		fmt.Fprintf(stdout, "note: %s\n", n)
	}

	var yaml []byte
	if *brokerConf != "" {
		if yaml, err = plan.Config.YAML(*brokerConf); err != nil {
			fmt.Fprintf(stderr, "broker import: %v\nnothing was imported\n", err)
			return 1
		}
	}
	if *dryRun {
		printPlan(stdout, plan)
		printConfig(stdout, plan.Config, *brokerConf, "")
		if yaml != nil {
			fmt.Fprintf(stdout, "\nThe config file it would write:\n%s", yaml)
		}
		return 0
	}
	// The config file first: it changes nothing on the broker, and a
	// path that cannot be written stops the import before anything else.
	if *out != "" {
		if err := os.WriteFile(*out, yaml, 0o644); err != nil {
			fmt.Fprintf(stderr, "broker import: %v\nnothing was imported\n", err)
			return 1
		}
	}

	if *addr == "" {
		printConfig(stdout, plan.Config, *brokerConf, *out)
		fmt.Fprintf(stdout, "\nNo broker (--broker \"\"): %d topics, %d groups and %d offsets are left for a run against the broker once it runs.\n",
			len(plan.Topics), len(plan.Groups), len(plan.Offsets))
		return 0
	}
	if *ak != "" && *sk == "" {
		*sk = os.Getenv("RMQ_SECRET_KEY")
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	cl := remoting.NewClient(remoting.ClientOptions{Logger: slog.New(slog.DiscardHandler)})
	defer cl.Close()
	s := &adminSession{cl: cl, broker: *addr, ak: *ak, sk: *sk}
	im := &importer{s: s, w: tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)}
	failed, err := im.apply(ctx, plan)
	if err != nil {
		fmt.Fprintf(stderr, "broker import: %v\nnothing was changed on the broker", err)
		if *out != "" {
			fmt.Fprintf(stderr, " (the config file %s was written)", *out)
		}
		fmt.Fprintln(stderr)
		return 1
	}
	printConfig(stdout, plan.Config, *brokerConf, *out)
	if failed > 0 {
		fmt.Fprintf(stderr, "broker import: %d steps failed (the lines marked FAILED); the others were applied, and running the import again redoes only what differs\n", failed)
		return 1
	}
	return 0
}

// importer applies a plan to one broker and prints a line for each step.
type importer struct {
	s      *adminSession
	w      *tabwriter.Writer
	failed int
}

func (im *importer) line(kind, name, outcome string) {
	fmt.Fprintf(im.w, "  %s\t%s\t%s\n", kind, name, outcome)
}

func (im *importer) fail(kind, name string, err error) {
	im.failed++
	im.line(kind, name, "FAILED: "+err.Error())
}

// apply takes the plan's steps in order, topics, groups, offsets, and
// returns how many failed. A broker whose topics and groups it cannot
// read is an error before any step.
func (im *importer) apply(ctx context.Context, p *apacheimport.Plan) (int, error) {
	s := im.s
	topics, err := brokerTopics(ctx, s, s.broker)
	if err != nil {
		return 0, fmt.Errorf("cannot read the broker's topics: %w", err)
	}
	groups, err := brokerGroups(ctx, s, s.broker)
	if err != nil {
		return 0, fmt.Errorf("cannot read the broker's groups: %w", err)
	}

	fmt.Fprintf(im.w, "\nTopics (%d to import) on %s:\n", len(p.Topics), s.broker)
	for _, t := range p.Topics {
		im.topic(ctx, t, topics)
	}
	fmt.Fprintf(im.w, "\nConsumer groups (%d to import):\n", len(p.Groups))
	for _, g := range p.Groups {
		im.group(ctx, g, groups)
	}
	fmt.Fprintf(im.w, "\nConsumer offsets (%d queues to import; messages are not migrated, so an offset past what this broker holds is clamped to its max offset):\n", len(p.Offsets))
	im.offsets(ctx, p.Offsets)
	printSkipped(im.w, p.Skipped)
	im.w.Flush()
	return im.failed, nil
}

// topic creates or updates one topic to Apache's settings.
func (im *importer) topic(ctx context.Context, t apacheimport.TopicStep, held map[string]remoting.TopicConfig) {
	c := t.Config
	want := remoting.TopicConfig{TopicName: c.TopicName, ReadQueueNums: c.ReadQueueNums, WriteQueueNums: c.WriteQueueNums, Perm: c.Perm,
		TopicFilterType: cmpOr(c.TopicFilterType, "SINGLE_TAG"), TopicSysFlag: c.TopicSysFlag, Order: c.Order, MessageType: t.MessageType}
	desc := topicDesc(want)
	old, exists := held[c.TopicName]
	if exists && old == want {
		im.line("topic", c.TopicName, "unchanged: "+desc)
		return
	}
	ext := map[string]string{
		"topic": c.TopicName, "defaultTopic": remoting.AutoCreateTopicKey,
		"readQueueNums": strconv.Itoa(want.ReadQueueNums), "writeQueueNums": strconv.Itoa(want.WriteQueueNums),
		"perm": strconv.Itoa(want.Perm), "topicFilterType": want.TopicFilterType,
		"topicSysFlag": strconv.Itoa(want.TopicSysFlag), "order": strconv.FormatBool(want.Order),
	}
	switch {
	case want.MessageType != "":
		ext["attributes"] = "+message.type=" + want.MessageType
	case exists && old.MessageType != "":
		ext["attributes"] = "-message.type" // an update without attributes would keep it
	}
	if _, err := im.s.invoke(ctx, im.s.broker, remoting.UpdateAndCreateTopic, ext, nil); err != nil {
		im.fail("topic", c.TopicName, err)
		return
	}
	held[c.TopicName] = want
	if exists {
		im.line("topic", c.TopicName, "updated: "+desc+" (was "+topicDesc(old)+")")
		return
	}
	im.line("topic", c.TopicName, "created: "+desc)
}

func topicDesc(tc remoting.TopicConfig) string {
	s := fmt.Sprintf("%d read, %d write queues, perm %s", tc.ReadQueueNums, tc.WriteQueueNums, permString(tc.Perm))
	if tc.Order {
		s += ", ordered"
	}
	if tc.MessageType != "" {
		s += ", " + tc.MessageType
	}
	return s
}

func cmpOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// groupConfig is this broker's configuration of an Apache group.
func groupConfig(g apacheimport.GroupConfig) broker.SubscriptionGroupConfig {
	gc := broker.SubscriptionGroupConfig{GroupName: g.GroupName, ConsumeEnable: *g.ConsumeEnable, ConsumeFromMinEnable: *g.ConsumeFromMinEnable,
		ConsumeBroadcastEnable: *g.ConsumeBroadcastEnable, RetryQueueNums: *g.RetryQueueNums, RetryMaxTimes: *g.RetryMaxTimes,
		BrokerID: g.BrokerID, WhichBrokerWhenConsumeSlowly: *g.WhichBrokerWhenConsumeSlowly,
		NotifyConsumerIdsChangedEnable: *g.NotifyConsumerIdsChangedEnable, ConsumeMessageOrderly: g.ConsumeMessageOrderly}
	if p := g.GroupRetryPolicy; p != nil && (p.ExponentialRetryPolicy != nil || p.CustomizedRetryPolicy != nil || p.Type == broker.RetryPolicyExponential) {
		gp := &broker.GroupRetryPolicy{Type: p.Type}
		if e := p.ExponentialRetryPolicy; e != nil {
			gp.ExponentialRetryPolicy = &broker.ExponentialRetryPolicy{Initial: e.Initial, Max: e.Max, Multiplier: e.Multiplier}
		}
		if c := p.CustomizedRetryPolicy; c != nil {
			gp.CustomizedRetryPolicy = &broker.CustomizedRetryPolicy{Next: c.Next}
		}
		gc.GroupRetryPolicy = gp
	}
	return gc
}

// group creates or updates one consumer group to Apache's settings.
func (im *importer) group(ctx context.Context, g apacheimport.GroupStep, held map[string]broker.SubscriptionGroupConfig) {
	want := groupConfig(g.Config)
	desc := fmt.Sprintf("retry %d queues, %d times", want.RetryQueueNums, want.RetryMaxTimes)
	if !want.ConsumeEnable {
		desc += ", consume disabled"
	}
	if want.ConsumeMessageOrderly {
		desc += ", orderly"
	}
	if want.GroupRetryPolicy != nil {
		desc += ", " + cmpOr(want.GroupRetryPolicy.Type, broker.RetryPolicyCustomized) + " retry policy"
	}
	old, exists := held[want.GroupName]
	if exists {
		// What this broker adds of its own is kept.
		want.AllocateStrategy = old.AllocateStrategy
		a, _ := json.Marshal(old)
		b, _ := json.Marshal(want)
		if string(a) == string(b) {
			im.line("group", want.GroupName, "unchanged: "+desc)
			return
		}
	}
	body, err := json.Marshal(want)
	if err == nil {
		_, err = im.s.invoke(ctx, im.s.broker, remoting.UpdateAndCreateSubscriptionGroup, nil, body)
	}
	if err != nil {
		im.fail("group", want.GroupName, err)
		return
	}
	if exists {
		im.line("group", want.GroupName, "updated: "+desc)
		return
	}
	im.line("group", want.GroupName, "created: "+desc)
}

// offsets sets each committed offset, clamped into what the broker holds
// of the queue.
func (im *importer) offsets(ctx context.Context, steps []apacheimport.OffsetStep) {
	for _, o := range steps {
		name := fmt.Sprintf("%s@%s queue %d", o.Topic, o.Group, o.QueueID)
		q := map[string]string{"topic": o.Topic, "queueId": strconv.Itoa(int(o.QueueID))}
		minOff, err := im.queueOffset(ctx, remoting.GetMinOffset, q)
		if err != nil {
			im.fail("offset", name, err)
			continue
		}
		maxOff, err := im.queueOffset(ctx, remoting.GetMaxOffset, q)
		if err != nil {
			im.fail("offset", name, err)
			continue
		}
		to := min(max(o.Offset, minOff), maxOff)
		ext := map[string]string{"consumerGroup": o.Group, "topic": o.Topic, "queueId": strconv.Itoa(int(o.QueueID)), "commitOffset": strconv.FormatInt(to, 10)}
		if _, err := im.s.invoke(ctx, im.s.broker, remoting.UpdateConsumerOffset, ext, nil); err != nil {
			im.fail("offset", name, err)
			continue
		}
		switch {
		case to == o.Offset:
			im.line("offset", name, fmt.Sprintf("set to %d", to))
		default:
			im.line("offset", name, fmt.Sprintf("CLAMPED: Apache's %d is outside the %d..%d this broker holds; set to %d", o.Offset, minOff, maxOff, to))
		}
	}
}

// queueOffset asks GET_MIN_OFFSET or GET_MAX_OFFSET of a queue.
func (im *importer) queueOffset(ctx context.Context, code int16, ext map[string]string) (int64, error) {
	resp, err := im.s.invoke(ctx, im.s.broker, code, ext, nil)
	if err != nil {
		return 0, err
	}
	off, err := strconv.ParseInt(resp.Get("offset"), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s: %s: bad offset %q", im.s.broker, remoting.RequestCode(code), resp.Get("offset"))
	}
	return off, nil
}

// printPlan prints what an import would do, for --dry-run.
func printPlan(w io.Writer, p *apacheimport.Plan) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "\nTopics (%d to import; each created, or updated where the broker has it otherwise):\n", len(p.Topics))
	for _, t := range p.Topics {
		c := t.Config
		fmt.Fprintf(tw, "  topic\t%s\t%s\n", c.TopicName, topicDesc(remoting.TopicConfig{ReadQueueNums: c.ReadQueueNums, WriteQueueNums: c.WriteQueueNums, Perm: c.Perm, Order: c.Order, MessageType: t.MessageType}))
	}
	fmt.Fprintf(tw, "\nConsumer groups (%d to import):\n", len(p.Groups))
	for _, g := range p.Groups {
		gc := groupConfig(g.Config)
		fmt.Fprintf(tw, "  group\t%s\tretry %d queues, %d times\n", gc.GroupName, gc.RetryQueueNums, gc.RetryMaxTimes)
	}
	fmt.Fprintf(tw, "\nConsumer offsets (%d queues to import; each clamped into what the broker holds of the queue then, since messages are not migrated):\n", len(p.Offsets))
	for _, o := range p.Offsets {
		fmt.Fprintf(tw, "  offset\t%s@%s queue %d\t%d\n", o.Topic, o.Group, o.QueueID, o.Offset)
	}
	printSkipped(tw, p.Skipped)
	tw.Flush()
}

func printSkipped(w io.Writer, skipped []apacheimport.Skip) {
	fmt.Fprintf(w, "\nNot imported (%d):\n", len(skipped))
	for _, s := range skipped {
		fmt.Fprintf(w, "  %s\t%s\t%s\n", s.Kind, s.Name, s.Reason)
	}
}

// printConfig prints how broker.conf mapped; out is the file written, ""
// for none.
func printConfig(w io.Writer, c apacheimport.Config, brokerConf, out string) {
	if brokerConf == "" {
		fmt.Fprintln(w, "\nNo --broker-conf: no config mapped.")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "\n%s: %d keys mapped", brokerConf, len(c.Mapped))
	if out != "" {
		fmt.Fprintf(tw, ", written to %s", out)
	}
	fmt.Fprintln(tw, ":")
	for _, m := range c.Mapped {
		val := fmt.Sprint(m.ToValue)
		if list, ok := m.ToValue.([]string); ok {
			val = strings.Join(list, ", ")
		}
		note := ""
		if m.Note != "" {
			note = " (" + m.Note + ")"
		}
		fmt.Fprintf(tw, "  %s=%s\t→ %s: %s%s\n", m.Key, m.Value, m.To, val, note)
	}
	fmt.Fprintf(tw, "\n%s: %d keys not mapped:\n", brokerConf, len(c.Unmapped))
	for _, u := range slices.Clone(c.Unmapped) {
		fmt.Fprintf(tw, "  %s\t%s\n", u.Name, u.Reason)
	}
	for _, a := range c.Attention {
		fmt.Fprintf(tw, "attention: %s\n", a)
	}
	tw.Flush()
}
