package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"

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

// brokerGroups reads the broker's group table (GET_ALL_SUBSCRIPTIONGROUP_CONFIG).
func brokerGroups(ctx context.Context, s *adminSession) (map[string]broker.SubscriptionGroupConfig, error) {
	var w struct {
		SubscriptionGroupTable map[string]broker.SubscriptionGroupConfig `json:"subscriptionGroupTable"`
	}
	if err := s.invokeJSON(ctx, s.broker, remoting.GetAllSubscriptionGroupConfig, nil, &w); err != nil {
		return nil, err
	}
	return w.SubscriptionGroupTable, nil
}

func callGroupList(ctx context.Context, s *adminSession, _ any) (any, error) {
	groups, err := brokerGroups(ctx, s)
	if err != nil {
		return nil, err
	}
	rows := []broker.SubscriptionGroupConfig{}
	for _, gc := range groups {
		rows = append(rows, gc)
	}
	sortRows(rows, func(gc broker.SubscriptionGroupConfig) string { return gc.GroupName })
	return rows, nil
}

func printGroups(w io.Writer, rows []broker.SubscriptionGroupConfig) error {
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
		out = append(out, []string{gc.GroupName, fmt.Sprint(gc.ConsumeEnable), fmt.Sprint(gc.ConsumeBroadcastEnable), fmt.Sprint(gc.ConsumeFromMinEnable),
			fmt.Sprint(gc.RetryQueueNums), fmt.Sprint(gc.RetryMaxTimes), fmt.Sprint(gc.NotifyConsumerIdsChangedEnable), strategy, fmt.Sprint(gc.AutoCreated)})
	}
	return table(w, []string{"GROUP", "CONSUME", "BROADCAST", "FROM MIN", "RETRY QUEUES", "MAX RETRIES", "NOTIFY IDS", "STRATEGY", "AUTO CREATED"}, out)
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
		return func() (any, error) {
			if *group == "" {
				return nil, errors.New("--group required")
			}
			a := groupConfigArg{Group: *group, Create: create}
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

func callGroupUpdate(ctx context.Context, s *adminSession, args any) (any, error) {
	a := args.(groupConfigArg)
	groups, err := brokerGroups(ctx, s)
	if err != nil {
		return nil, err
	}
	gc, exists := groups[a.Group]
	if exists && a.Create {
		return nil, fmt.Errorf("consumer group %s has a configuration on %s (change it with groups update)", a.Group, s.broker)
	}
	if !exists {
		gc = defaultGroup(a.Group)
	}
	for _, f := range []struct {
		dst *bool
		v   *bool
	}{{&gc.ConsumeEnable, a.Consume}, {&gc.ConsumeBroadcastEnable, a.Broadcast}, {&gc.ConsumeFromMinEnable, a.FromMin}, {&gc.NotifyConsumerIdsChangedEnable, a.Notify}} {
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
	gc.AutoCreated = false // an operator's configuration now
	body, err := json.Marshal(gc)
	if err != nil {
		return nil, err
	}
	if _, err := s.invoke(ctx, s.broker, remoting.UpdateAndCreateSubscriptionGroup, nil, body); err != nil {
		return nil, err
	}
	if groups, err = brokerGroups(ctx, s); err != nil {
		return nil, err
	}
	gc, ok := groups[a.Group]
	if !ok {
		return nil, fmt.Errorf("%s answered UPDATE_AND_CREATE_SUBSCRIPTIONGROUP but does not list %s", s.broker, a.Group)
	}
	return []broker.SubscriptionGroupConfig{gc}, nil
}

// groupDeleteArg is the arguments of "groups delete".
type groupDeleteArg struct {
	Group       string
	CleanOffset bool
	KeepTopics  bool
	Namesrv     string
}

func groupDeleteArgs(fs *pflag.FlagSet) func() (any, error) {
	var a groupDeleteArg
	fs.StringVar(&a.Group, "group", "", "consumer group (required)")
	fs.BoolVar(&a.CleanOffset, "clean-offsets", false, "delete the group's committed offsets too (cleanOffset)")
	fs.BoolVar(&a.KeepTopics, "keep-topics", false, "keep the group's %RETRY% and %DLQ% topics")
	ns := namesrvFlag(fs)
	return func() (any, error) {
		if a.Group == "" {
			return nil, errors.New("--group required")
		}
		a.Namesrv = *ns
		return a, nil
	}
}

// callGroupDelete deletes the group's configuration and then, as mqadmin
// deleteSubGroup does, its retry and dead-letter topics on the broker and
// the name server.
func callGroupDelete(ctx context.Context, s *adminSession, args any) (any, error) {
	a := args.(groupDeleteArg)
	ext := map[string]string{"groupName": a.Group, "cleanOffset": strconv.FormatBool(a.CleanOffset)}
	if _, err := s.invoke(ctx, s.broker, remoting.DeleteSubscriptionGroup, ext, nil); err != nil {
		return nil, err
	}
	rows := []deletedRow{{What: "group", Name: a.Group, Where: "broker", Addr: s.broker, Result: "deleted"}}
	if a.KeepTopics {
		return rows, nil
	}
	topics, err := brokerTopics(ctx, s, s.broker)
	if err != nil {
		return rows, &partialError{[]error{err}}
	}
	var errs []error
	for _, topic := range []string{remoting.RetryGroupTopicPrefix + a.Group, remoting.DLQGroupTopicPrefix + a.Group} {
		if _, ok := topics[topic]; !ok {
			continue
		}
		res, err := callTopicDelete(ctx, s, topicArg{Topic: topic, Namesrv: a.Namesrv})
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
