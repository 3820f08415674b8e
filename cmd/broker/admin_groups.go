package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/pflag"

	"github.com/rmq-go/rmq/core/broker"
	"github.com/rmq-go/rmq/core/remoting"
)

// The subscription-group commands of mqadmin (updateSubGroup,
// deleteSubGroup) and the group table they change.
func init() {
	addAdminCommands(
		adminCommand{
			group: "groups", verb: "list", summary: "List the consumer groups' configurations (GET_ALL_SUBSCRIPTIONGROUP_CONFIG)",
			call:  callGroupList,
			print: printAs(printGroups),
		},
		adminCommand{
			group: "groups", verb: "create", summary: "Create a consumer group's configuration (UPDATE_AND_CREATE_SUBSCRIPTIONGROUP)",
			args:  groupConfigArgs(true),
			call:  callGroupUpdate,
			print: printAs(printGroups),
		},
		adminCommand{
			group: "groups", verb: "update", summary: "Create a consumer group, or change only the settings given (UPDATE_AND_CREATE_SUBSCRIPTIONGROUP)",
			args:  groupConfigArgs(false),
			call:  callGroupUpdate,
			print: printAs(printGroups),
		},
		adminCommand{
			group: "groups", verb: "delete", summary: "Delete a consumer group and its %RETRY% and %DLQ% topics (DELETE_SUBSCRIPTIONGROUP, DELETE_TOPIC_IN_*)",
			args:  groupDeleteArgs,
			call:  callGroupDelete,
			print: printAs(printDeleted),
		},
	)
}

// brokerGroups reads a broker's group table (GET_ALL_SUBSCRIPTIONGROUP_CONFIG).
func brokerGroups(ctx context.Context, s *adminSession, addr string) (map[string]broker.SubscriptionGroupConfig, error) {
	var w struct {
		SubscriptionGroupTable map[string]broker.SubscriptionGroupConfig `json:"subscriptionGroupTable"`
	}
	if err := s.invokeJSON(ctx, addr, remoting.GetAllSubscriptionGroupConfig, nil, &w); err != nil {
		return nil, err
	}
	return w.SubscriptionGroupTable, nil
}

// groupRow is a group's configuration on a broker: the broker's JSON with
// the broker's address.
type groupRow struct {
	Addr string `json:"addr"`
	broker.SubscriptionGroupConfig
}

func callGroupList(ctx context.Context, s *adminSession, _ any) (any, error) {
	groups, err := brokerGroups(ctx, s, s.broker)
	if err != nil {
		return nil, err
	}
	rows := []groupRow{}
	for _, gc := range groups {
		rows = append(rows, groupRow{s.broker, gc})
	}
	sortRows(rows, func(r groupRow) string { return r.GroupName })
	return rows, nil
}

func printGroups(w io.Writer, rows []groupRow) error {
	if len(rows) == 0 {
		_, err := fmt.Fprintln(w, "no consumer group configurations")
		return err
	}
	var out [][]string
	for _, gc := range rows {
		strategy := gc.AllocateStrategy
		if strategy == "" {
			strategy = "-"
		}
		attrs := []string{}
		for _, k := range slices.Sorted(maps.Keys(gc.Attributes)) {
			attrs = append(attrs, k+"="+gc.Attributes[k])
		}
		out = append(out, []string{gc.Addr, gc.GroupName, fmt.Sprint(gc.ConsumeEnable), fmt.Sprint(gc.ConsumeBroadcastEnable), fmt.Sprint(gc.ConsumeFromMinEnable),
			fmt.Sprint(gc.RetryQueueNums), fmt.Sprint(gc.RetryMaxTimes), fmt.Sprint(gc.NotifyConsumerIdsChangedEnable), fmt.Sprint(gc.ConsumeMessageOrderly), strategy, fmt.Sprint(gc.AutoCreated),
			cmpOr(strings.Join(attrs, ","), "-")})
	}
	return table(w, []string{"BROKER", "GROUP", "CONSUME", "BROADCAST", "FROM MIN", "RETRY QUEUES", "MAX RETRIES", "NOTIFY IDS", "ORDERLY", "STRATEGY", "AUTO CREATED", "ATTRIBUTES"}, out)
}

// groupConfigArg is the arguments of "groups create" and "groups update":
// the settings given, nil for the others.
type groupConfigArg struct {
	Group          string
	Create         bool
	Consume        *bool
	Broadcast      *bool
	FromMin        *bool
	RetryQueueNums *int
	RetryMaxTimes  *int
	Notify         *bool
	Orderly        *bool
	Attributes     map[string]string // "+name": value, "-name": ""
	Namesrv        string
	Cluster        string // every master of this cluster, not --broker
}

func groupConfigArgs(create bool) func(fs *pflag.FlagSet) func() (any, error) {
	return func(fs *pflag.FlagSet) func() (any, error) {
		group := fs.String("group", "", "consumer group (required)")
		consume := fs.Bool("consume", true, "the group may consume (consumeEnable)")
		broadcast := fs.Bool("broadcast", true, "the group may consume in broadcasting mode (consumeBroadcastEnable)")
		fromMin := fs.Bool("from-min", true, "a new group starts at the queue's min offset (consumeFromMinEnable)")
		retryQueues := fs.Int("retry-queues", 1, "queues of the group's retry topic; 0: no retries (retryQueueNums)")
		retryMax := fs.Int("retry-max", broker.DefaultMaxReconsumeTimes, "retries before a message goes to the dead-letter topic (retryMaxTimes)")
		notify := fs.Bool("notify-ids-changed", true, "tell consumers when the group's members change (notifyConsumerIdsChangedEnable)")
		orderly := fs.Bool("orderly", false, "the group is FIFO for RocketMQ 5 clients: a queue's next messages wait for those in flight (consumeMessageOrderly)")
		attrs := fs.String("attributes", "", `change attributes, as mqadmin's -a: "+priority.factor=50" sets one, "-priority.factor" removes it (comma-separated)`)
		cluster := clusterFlag(fs)
		ns := namesrvFlag(fs)
		return func() (any, error) {
			if *group == "" {
				return nil, errors.New("--group required")
			}
			a := groupConfigArg{Group: *group, Create: create, Cluster: *cluster, Namesrv: *ns}
			if fs.Changed("consume") {
				a.Consume = consume
			}
			if fs.Changed("broadcast") {
				a.Broadcast = broadcast
			}
			if fs.Changed("from-min") {
				a.FromMin = fromMin
			}
			if fs.Changed("retry-queues") {
				a.RetryQueueNums = retryQueues
			}
			if fs.Changed("retry-max") {
				a.RetryMaxTimes = retryMax
			}
			if fs.Changed("notify-ids-changed") {
				a.Notify = notify
			}
			if fs.Changed("orderly") {
				a.Orderly = orderly
			}
			if fs.Changed("attributes") {
				m, err := broker.ParseGroupAttributes(*attrs)
				if err != nil {
					return nil, fmt.Errorf("--attributes: %w", err)
				}
				a.Attributes = m
			}
			return a, nil
		}
	}
}

// defaultGroup is a new group's configuration: RocketMQ's defaults, the
// flags' defaults.
func defaultGroup(name string) broker.SubscriptionGroupConfig {
	return broker.SubscriptionGroupConfig{GroupName: name, ConsumeEnable: true, ConsumeFromMinEnable: true, ConsumeBroadcastEnable: true,
		RetryQueueNums: 1, RetryMaxTimes: broker.DefaultMaxReconsumeTimes, WhichBrokerWhenConsumeSlowly: 1, NotifyConsumerIdsChangedEnable: true}
}

// callGroupUpdate creates or changes the group on --broker, or on every
// master of --cluster, as mqadmin updateSubGroup -b or -c.
func callGroupUpdate(ctx context.Context, s *adminSession, args any) (any, error) {
	a := args.(groupConfigArg)
	addrs, err := brokerAddrs(ctx, s, a.Namesrv, a.Cluster)
	if err != nil {
		return nil, err
	}
	rows := []groupRow{}
	var errs []error
	for _, addr := range addrs {
		gc, err := updateGroupOn(ctx, s, addr, a)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		rows = append(rows, groupRow{addr, gc})
	}
	switch {
	case len(errs) == len(addrs):
		return nil, errors.Join(errs...)
	case len(errs) > 0:
		return rows, &partialError{errs}
	}
	return rows, nil
}

// updateGroupOn creates or changes the group on the broker at addr and
// returns what the broker holds afterwards.
func updateGroupOn(ctx context.Context, s *adminSession, addr string, a groupConfigArg) (broker.SubscriptionGroupConfig, error) {
	groups, err := brokerGroups(ctx, s, addr)
	if err != nil {
		return broker.SubscriptionGroupConfig{}, err
	}
	gc, exists := groups[a.Group]
	if exists && a.Create {
		return gc, fmt.Errorf("consumer group %s has a configuration on %s (change it with groups update)", a.Group, addr)
	}
	if !exists {
		gc = defaultGroup(a.Group)
	}
	for _, f := range []struct {
		dst *bool
		v   *bool
	}{{&gc.ConsumeEnable, a.Consume}, {&gc.ConsumeBroadcastEnable, a.Broadcast}, {&gc.ConsumeFromMinEnable, a.FromMin}, {&gc.NotifyConsumerIdsChangedEnable, a.Notify}, {&gc.ConsumeMessageOrderly, a.Orderly}} {
		if f.v != nil {
			*f.dst = *f.v
		}
	}
	if a.RetryQueueNums != nil {
		gc.RetryQueueNums = *a.RetryQueueNums
	}
	if a.RetryMaxTimes != nil {
		gc.RetryMaxTimes = *a.RetryMaxTimes
	}
	// Only the attributes to change: the broker keeps the others.
	gc.Attributes = a.Attributes
	gc.AutoCreated = false // an operator's configuration now
	body, err := json.Marshal(gc)
	if err != nil {
		return gc, err
	}
	if _, err := s.invoke(ctx, addr, remoting.UpdateAndCreateSubscriptionGroup, nil, body); err != nil {
		return gc, err
	}
	if groups, err = brokerGroups(ctx, s, addr); err != nil {
		return gc, err
	}
	gc, ok := groups[a.Group]
	if !ok {
		return gc, fmt.Errorf("%s answered UPDATE_AND_CREATE_SUBSCRIPTIONGROUP but does not list %s", addr, a.Group)
	}
	return gc, nil
}

// groupDeleteArg is the arguments of "groups delete".
type groupDeleteArg struct {
	Group       string
	CleanOffset bool
	KeepTopics  bool
	Namesrv     string
	Cluster     string // every master of this cluster, not --broker
}

func groupDeleteArgs(fs *pflag.FlagSet) func() (any, error) {
	var a groupDeleteArg
	fs.StringVar(&a.Group, "group", "", "consumer group (required)")
	fs.BoolVar(&a.CleanOffset, "clean-offsets", false, "delete the group's committed offsets too (cleanOffset)")
	fs.BoolVar(&a.KeepTopics, "keep-topics", false, "keep the group's %RETRY% and %DLQ% topics")
	fs.StringVar(&a.Cluster, "cluster", "", "every master broker of this cluster on --namesrv, not only --broker")
	ns := namesrvFlag(fs)
	return func() (any, error) {
		if a.Group == "" {
			return nil, errors.New("--group required")
		}
		a.Namesrv = *ns
		return a, nil
	}
}

// callGroupDelete deletes the group's configuration on --broker, or on
// every master of --cluster, and then, as mqadmin deleteSubGroup does,
// its retry and dead-letter topics on those brokers and the name server.
func callGroupDelete(ctx context.Context, s *adminSession, args any) (any, error) {
	a := args.(groupDeleteArg)
	addrs, err := brokerAddrs(ctx, s, a.Namesrv, a.Cluster)
	if err != nil {
		return nil, err
	}
	rows := []deletedRow{}
	var errs []error
	topics := map[string]bool{}
	ext := map[string]string{"groupName": a.Group, "cleanOffset": strconv.FormatBool(a.CleanOffset)}
	for _, addr := range addrs {
		if _, err := s.invoke(ctx, addr, remoting.DeleteSubscriptionGroup, ext, nil); err != nil {
			rows = append(rows, deletedRow{What: "group", Name: a.Group, Where: "broker", Addr: addr, Result: "failed"})
			errs = append(errs, err)
			continue
		}
		rows = append(rows, deletedRow{What: "group", Name: a.Group, Where: "broker", Addr: addr, Result: "deleted"})
		if a.KeepTopics {
			continue
		}
		held, err := brokerTopics(ctx, s, addr)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, topic := range []string{remoting.RetryGroupTopicPrefix + a.Group, remoting.DLQGroupTopicPrefix + a.Group} {
			if _, ok := held[topic]; ok {
				topics[topic] = true
			}
		}
	}
	if len(errs) == len(addrs) {
		return nil, errors.Join(errs...)
	}
	for _, topic := range slices.Sorted(maps.Keys(topics)) {
		res, err := callTopicDelete(ctx, s, topicArg{Topic: topic, Namesrv: a.Namesrv, Cluster: a.Cluster})
		if r, ok := res.([]deletedRow); ok {
			rows = append(rows, r...)
		}
		if err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return rows, &partialError{errs}
	}
	return rows, nil
}
