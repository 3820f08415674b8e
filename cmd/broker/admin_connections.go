package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"

	"github.com/spf13/pflag"

	"github.com/rmq-go/rmq/core/remoting"
)

// What consumers and producers are doing, as mqadmin consumerProgress,
// consumerConnection and producerConnection show it.
func init() {
	addAdminCommands(
		adminCommand{
			group: "consumers", verb: "progress", summary: "Show a group's offsets and lag per queue, or every group's lag (GET_CONSUME_STATS)",
			args: func(fs *pflag.FlagSet) func() (any, error) {
				var a progressArg
				fs.StringVar(&a.Group, "group", "", "consumer group (default: every configured group's totals)")
				fs.StringVar(&a.Topic, "topic", "", "only this topic (default: every topic the group has offsets on)")
				all := allBrokersFlags(fs)
				return func() (any, error) {
					if a.Group == "" && a.Topic != "" {
						return nil, errors.New("--topic needs --group")
					}
					if a.Namesrv = all(); a.Namesrv != "" && a.Group == "" {
						return nil, errors.New("--all needs --group")
					}
					return a, nil
				}
			},
			call:  callProgress,
			print: printProgress,
		},
		adminCommand{
			group: "consumers", verb: "connections", summary: "List a consumer group's online clients and subscriptions (GET_CONSUMER_CONNECTION_LIST)",
			args:  groupArg,
			call:  callConsumerConnections,
			print: printAs(printConsumerConnections),
		},
		adminCommand{
			group: "producers", verb: "connections", summary: "List a producer group's online clients (GET_PRODUCER_CONNECTION_LIST)",
			args:  groupArg,
			call:  callProducerConnections,
			print: printAs(printProducerConnections),
		},
	)
}

// groupArg declares a required --group.
func groupArg(fs *pflag.FlagSet) func() (any, error) {
	group := fs.String("group", "", "group (required)")
	return func() (any, error) {
		if *group == "" {
			return nil, errors.New("--group required")
		}
		return *group, nil
	}
}

type progressArg struct{ Group, Topic, Namesrv string }

// queueProgress is one queue of a group's progress.
type queueProgress struct {
	Topic          string `json:"topic"`
	BrokerName     string `json:"brokerName"`
	QueueID        int32  `json:"queueId"`
	BrokerOffset   int64  `json:"brokerOffset"`   // the queue's max offset
	ConsumerOffset int64  `json:"consumerOffset"` // the group's committed offset
	Lag            int64  `json:"lag"`            // brokerOffset − consumerOffset
	LastTimestamp  int64  `json:"lastTimestamp"`  // ms, store time of the last consumed message; 0 for none
}

// groupProgress is "consumers progress --group": the queues and their
// totals.
type groupProgress struct {
	Group          string          `json:"group"`
	Queues         []queueProgress `json:"queues"`
	BrokerOffset   int64           `json:"brokerOffset"`
	ConsumerOffset int64           `json:"consumerOffset"`
	Lag            int64           `json:"lag"`
	ConsumeTPS     float64         `json:"consumeTps"`
}

// groupSummary is one group of "consumers progress" without --group.
type groupSummary struct {
	Group        string `json:"group"`
	Clients      int    `json:"clients"`      // online clients, 0 when offline
	ConsumeType  string `json:"consumeType"`  // of the online clients; "" when offline
	MessageModel string `json:"messageModel"` // of the online clients; "" when offline
	Lag          int64  `json:"lag"`          // over every topic the group has offsets on
}

// consumeStats asks GET_CONSUME_STATS for a group's queues, of --broker,
// or with namesrv of every master of the topic's route (the group's retry
// topic's without a topic, as mqadmin consumerProgress does).
func consumeStats(ctx context.Context, s *adminSession, group, topic, namesrv string) (groupProgress, error) {
	g := groupProgress{Group: group, Queues: []queueProgress{}}
	routeTopic := topic
	if routeTopic == "" {
		routeTopic = remoting.RetryGroupTopicPrefix + group
	}
	err := eachBroker(ctx, s, namesrv, routeTopic, func(addr string) error {
		return addConsumeStats(ctx, s, addr, &g, topic)
	})
	sortRows(g.Queues, func(q queueProgress) string {
		return fmt.Sprintf("%s\x00%s\x00%010d", q.Topic, q.BrokerName, q.QueueID)
	})
	return g, err
}

// addConsumeStats adds one broker's answer to g.
func addConsumeStats(ctx context.Context, s *adminSession, addr string, g *groupProgress, topic string) error {
	ext := map[string]string{"consumerGroup": g.Group}
	if topic != "" {
		ext["topic"] = topic
	}
	resp, err := s.invoke(ctx, addr, remoting.GetConsumeStats, ext, nil)
	if err != nil {
		return err
	}
	entries, err := decodeQueueKeyed[struct {
		BrokerOffset   int64 `json:"brokerOffset"`
		ConsumerOffset int64 `json:"consumerOffset"`
		LastTimestamp  int64 `json:"lastTimestamp"`
	}](resp.Body, "offsetTable")
	if err != nil {
		return fmt.Errorf("%s: GET_CONSUME_STATS: %w", addr, err)
	}
	for _, e := range entries {
		q := queueProgress{Topic: e.Queue.Topic, BrokerName: e.Queue.BrokerName, QueueID: e.Queue.QueueID,
			BrokerOffset: e.Value.BrokerOffset, ConsumerOffset: e.Value.ConsumerOffset, LastTimestamp: e.Value.LastTimestamp}
		q.Lag = max(0, q.BrokerOffset-q.ConsumerOffset)
		g.Queues = append(g.Queues, q)
		g.BrokerOffset += q.BrokerOffset
		g.ConsumerOffset += q.ConsumerOffset
		g.Lag += q.Lag
	}
	tps, _ := numberField(resp.Body, "consumeTps")
	g.ConsumeTPS += tps
	return nil
}

func callProgress(ctx context.Context, s *adminSession, args any) (any, error) {
	a := args.(progressArg)
	if a.Group != "" {
		return consumeStats(ctx, s, a.Group, a.Topic, a.Namesrv)
	}
	groups, err := brokerGroups(ctx, s, s.broker)
	if err != nil {
		return nil, err
	}
	rows := []groupSummary{}
	var errs []error
	for _, name := range slices.Sorted(maps.Keys(groups)) {
		row := groupSummary{Group: name}
		g, err := consumeStats(ctx, s, name, "", "")
		if err != nil {
			errs = append(errs, err)
		}
		row.Lag = g.Lag
		var cc remoting.ConsumerConnection
		err = s.invokeJSON(ctx, s.broker, remoting.GetConsumerConnectionList, map[string]string{"consumerGroup": name}, &cc)
		var ce *codeError
		switch {
		case err == nil:
			row.Clients, row.ConsumeType, row.MessageModel = len(cc.ConnectionSet), cc.ConsumeType, cc.MessageModel
		case errors.As(err, &ce) && ce.code == remoting.ConsumerNotOnline:
		default:
			errs = append(errs, err)
		}
		rows = append(rows, row)
	}
	if len(errs) > 0 {
		return rows, &partialError{errs}
	}
	return rows, nil
}

// printProgress prints one group's queues or every group's summary.
func printProgress(w io.Writer, answer json.RawMessage) error {
	if len(answer) > 0 && answer[0] == '[' {
		return printAs(printGroupSummaries)(w, answer)
	}
	return printAs(printGroupProgress)(w, answer)
}

func printGroupProgress(w io.Writer, g groupProgress) error {
	var out [][]string
	for _, q := range g.Queues {
		out = append(out, []string{q.Topic, q.BrokerName, fmt.Sprint(q.QueueID), fmt.Sprint(q.BrokerOffset), fmt.Sprint(q.ConsumerOffset), fmt.Sprint(q.Lag), millis(q.LastTimestamp)})
	}
	if err := table(w, []string{"TOPIC", "BROKER", "QUEUE", "BROKER OFFSET", "CONSUMER OFFSET", "LAG", "LAST CONSUMED"}, out); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "\ngroup %s: %d queues, broker offset %d, consumer offset %d, lag %d, consume TPS %.2f\n",
		g.Group, len(g.Queues), g.BrokerOffset, g.ConsumerOffset, g.Lag, g.ConsumeTPS)
	return err
}

func printGroupSummaries(w io.Writer, rows []groupSummary) error {
	if len(rows) == 0 {
		_, err := fmt.Fprintln(w, "no consumer group configurations")
		return err
	}
	var out [][]string
	for _, r := range rows {
		typ, model := r.ConsumeType, r.MessageModel
		if r.Clients == 0 {
			typ, model = "-", "-"
		}
		out = append(out, []string{r.Group, fmt.Sprint(r.Clients), typ, model, fmt.Sprint(r.Lag)})
	}
	return table(w, []string{"GROUP", "CLIENTS", "TYPE", "MODEL", "LAG"}, out)
}

// consumerConnections is "consumers connections": the broker's answer
// with the group's name.
type consumerConnections struct {
	Group string `json:"group"`
	remoting.ConsumerConnection
}

func callConsumerConnections(ctx context.Context, s *adminSession, args any) (any, error) {
	cc := consumerConnections{Group: args.(string)}
	err := s.invokeJSON(ctx, s.broker, remoting.GetConsumerConnectionList, map[string]string{"consumerGroup": cc.Group}, &cc.ConsumerConnection)
	return cc, err
}

func printConsumerConnections(w io.Writer, cc consumerConnections) error {
	if err := printConnections(w, cc.ConnectionSet); err != nil {
		return err
	}
	fmt.Fprintln(w)
	var subs [][]string
	for _, topic := range slices.Sorted(maps.Keys(cc.SubscriptionTable)) {
		sd := cc.SubscriptionTable[topic]
		typ := sd.ExpressionType
		if typ == "" {
			typ = "TAG"
		}
		subs = append(subs, []string{topic, typ, sd.SubString})
	}
	if err := table(w, []string{"TOPIC", "TYPE", "EXPRESSION"}, subs); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "\ngroup %s: %s, %s, %s\n", cc.Group, cc.ConsumeType, cc.MessageModel, cc.ConsumeFromWhere)
	return err
}

// producerConnections is "producers connections": the broker's answer
// with the group's name.
type producerConnections struct {
	Group string `json:"group"`
	remoting.ProducerConnection
}

func callProducerConnections(ctx context.Context, s *adminSession, args any) (any, error) {
	pc := producerConnections{Group: args.(string)}
	err := s.invokeJSON(ctx, s.broker, remoting.GetProducerConnectionList, map[string]string{"producerGroup": pc.Group}, &pc.ProducerConnection)
	return pc, err
}

func printProducerConnections(w io.Writer, pc producerConnections) error {
	return printConnections(w, pc.ConnectionSet)
}

func printConnections(w io.Writer, cs []remoting.Connection) error {
	var out [][]string
	for _, c := range cs {
		out = append(out, []string{c.ClientID, c.ClientAddr, c.Language, fmt.Sprint(c.Version)})
	}
	return table(w, []string{"CLIENT ID", "ADDR", "LANGUAGE", "VERSION"}, out)
}
