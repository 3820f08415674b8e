package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/rmq-go/rmq/core/broker"
	"github.com/rmq-go/rmq/core/remoting"
)

// The topic commands of mqadmin (topicRoute, topicStatus, updateTopic,
// deleteTopic); "topics list" is the broker's admin command (admin.go).
func init() {
	addAdminCommands(
		adminCommand{
			group: "topics", verb: "route", summary: "Show a topic's brokers and queue counts from the name server (GET_ROUTEINFO_BY_TOPIC)",
			args:  topicArgs(true),
			call:  callTopicRoute,
			print: printAs(printTopicRoute),
		},
		adminCommand{
			group: "topics", verb: "status", summary: "Show each queue's min and max offset and last store time (GET_TOPIC_STATS_INFO)",
			args: func(fs *pflag.FlagSet) func() (any, error) {
				topic := topicArgs(false)(fs)
				all := allBrokersFlags(fs)
				return func() (any, error) {
					a, err := topic()
					if err != nil {
						return nil, err
					}
					ta := a.(topicArg)
					ta.Namesrv = all()
					return ta, nil
				}
			},
			call:  callTopicStatus,
			print: printAs(printTopicStatus),
		},
		adminCommand{
			group: "topics", verb: "create", summary: "Create a topic that does not exist yet (UPDATE_AND_CREATE_TOPIC)",
			args:  topicConfigArgs(true),
			call:  callTopicUpdate,
			print: printAs(printTopicRows),
		},
		adminCommand{
			group: "topics", verb: "update", summary: "Create a topic, or change only the settings given (UPDATE_AND_CREATE_TOPIC)",
			args:  topicConfigArgs(false),
			call:  callTopicUpdate,
			print: printAs(printTopicRows),
		},
		adminCommand{
			group: "topics", verb: "delete", summary: "Delete a topic on the broker and the name server (DELETE_TOPIC_IN_BROKER, DELETE_TOPIC_IN_NAMESRV)",
			args: func(fs *pflag.FlagSet) func() (any, error) {
				topic := topicArgs(true)(fs)
				cluster := clusterFlag(fs)
				return func() (any, error) {
					a, err := topic()
					if err != nil {
						return nil, err
					}
					ta := a.(topicArg)
					ta.Cluster = *cluster
					return ta, nil
				}
			},
			call:  callTopicDelete,
			print: printAs(printDeleted),
		},
	)
}

// defaultNamesrv is --namesrv's default: the broker's embedded name server.
const defaultNamesrv = "127.0.0.1:9876"

// namesrvFlag declares --namesrv on a command that asks the name server.
func namesrvFlag(fs *pflag.FlagSet) *string {
	return fs.String("namesrv", defaultNamesrv, `the name server's address ("" for none, where optional)`)
}

// topicArg is the arguments of a command about one topic.
type topicArg struct {
	Topic   string
	Namesrv string
	Cluster string // every master of this cluster, not --broker
}

func topicArgs(namesrv bool) func(fs *pflag.FlagSet) func() (any, error) {
	return func(fs *pflag.FlagSet) func() (any, error) {
		var a topicArg
		fs.StringVar(&a.Topic, "topic", "", "topic (required)")
		ns := new(string)
		if namesrv {
			ns = namesrvFlag(fs)
		}
		return func() (any, error) {
			if a.Topic == "" {
				return nil, errors.New("--topic required")
			}
			a.Namesrv = *ns
			return a, nil
		}
	}
}

// clusterFlag declares --cluster on a command that changes --broker, or
// every master broker of a cluster, as mqadmin's -b and -c.
func clusterFlag(fs *pflag.FlagSet) *string {
	return fs.String("cluster", "", "every master broker of this cluster on --namesrv, not only --broker")
}

// brokerAddrs returns --broker, or with cluster the address of every
// master broker of the cluster on namesrv (GET_BROKER_CLUSTER_INFO).
func brokerAddrs(ctx context.Context, s *adminSession, namesrv, cluster string) ([]string, error) {
	if cluster == "" {
		return []string{s.broker}, nil
	}
	if namesrv == "" {
		return nil, errors.New("--cluster needs --namesrv")
	}
	var info remoting.ClusterInfo
	if err := s.invokeJSON(ctx, namesrv, remoting.GetBrokerClusterInfo, nil, &info); err != nil {
		return nil, err
	}
	var addrs []string
	for _, name := range info.ClusterAddrTable[cluster] {
		if addr, ok := info.BrokerAddrTable[name].BrokerAddrs[0]; ok {
			addrs = append(addrs, addr)
		}
	}
	if len(addrs) == 0 {
		return nil, fmt.Errorf("name server %s knows no master broker of cluster %q", namesrv, cluster)
	}
	slices.Sort(addrs)
	return addrs, nil
}

// routeRow is one broker address of a topic's route.
type routeRow struct {
	Topic          string `json:"topic"`
	Cluster        string `json:"cluster"`
	BrokerName     string `json:"brokerName"`
	BrokerID       int64  `json:"brokerId"` // 0 is the master
	Addr           string `json:"addr"`
	ReadQueueNums  int    `json:"readQueueNums"`
	WriteQueueNums int    `json:"writeQueueNums"`
	Perm           int    `json:"perm"`
}

func callTopicRoute(ctx context.Context, s *adminSession, args any) (any, error) {
	a := args.(topicArg)
	if a.Namesrv == "" {
		return nil, errors.New("--namesrv required")
	}
	var rd remoting.TopicRouteData
	if err := s.invokeJSON(ctx, a.Namesrv, remoting.GetRouteInfoByTopic, map[string]string{"topic": a.Topic}, &rd); err != nil {
		return nil, err
	}
	queues := map[string]remoting.QueueData{}
	for _, q := range rd.QueueDatas {
		queues[q.BrokerName] = q
	}
	rows := []routeRow{}
	for _, bd := range rd.BrokerDatas {
		q := queues[bd.BrokerName]
		for _, id := range slices.Sorted(maps.Keys(bd.BrokerAddrs)) {
			rows = append(rows, routeRow{Topic: a.Topic, Cluster: bd.Cluster, BrokerName: bd.BrokerName, BrokerID: id, Addr: bd.BrokerAddrs[id],
				ReadQueueNums: q.ReadQueueNums, WriteQueueNums: q.WriteQueueNums, Perm: q.Perm})
		}
	}
	return rows, nil
}

func printTopicRoute(w io.Writer, rows []routeRow) error {
	var out [][]string
	for _, r := range rows {
		out = append(out, []string{r.Topic, r.Cluster, r.BrokerName, fmt.Sprint(r.BrokerID), r.Addr, fmt.Sprint(r.ReadQueueNums), fmt.Sprint(r.WriteQueueNums), permString(r.Perm)})
	}
	return table(w, []string{"TOPIC", "CLUSTER", "BROKER", "BID", "ADDR", "READ", "WRITE", "PERM"}, out)
}

// permString writes topic permission bits as RocketMQ's tools name them:
// 6 (RW), 4 (R-), 2 (-W).
func permString(perm int) string {
	r, w := "-", "-"
	if perm&remoting.PermRead != 0 {
		r = "R"
	}
	if perm&remoting.PermWrite != 0 {
		w = "W"
	}
	return fmt.Sprintf("%d (%s%s)", perm, r, w)
}

// queueStatus is one queue of "topics status".
type queueStatus struct {
	Topic               string `json:"topic"`
	BrokerName          string `json:"brokerName"`
	QueueID             int32  `json:"queueId"`
	MinOffset           int64  `json:"minOffset"`
	MaxOffset           int64  `json:"maxOffset"`
	LastUpdateTimestamp int64  `json:"lastUpdateTimestamp"` // ms, 0 when the queue is empty
}

// callTopicStatus asks --broker, or with --all every master of the
// topic's route, as mqadmin topicStatus does.
func callTopicStatus(ctx context.Context, s *adminSession, args any) (any, error) {
	a := args.(topicArg)
	rows := []queueStatus{}
	err := eachBroker(ctx, s, a.Namesrv, a.Topic, func(addr string) error {
		resp, err := s.invoke(ctx, addr, remoting.GetTopicStatsInfo, map[string]string{"topic": a.Topic}, nil)
		if err != nil {
			return err
		}
		entries, err := decodeQueueKeyed[struct {
			MinOffset           int64 `json:"minOffset"`
			MaxOffset           int64 `json:"maxOffset"`
			LastUpdateTimestamp int64 `json:"lastUpdateTimestamp"`
		}](resp.Body, "offsetTable")
		if err != nil {
			return fmt.Errorf("%s: GET_TOPIC_STATS_INFO: %w", addr, err)
		}
		for _, e := range entries {
			rows = append(rows, queueStatus{Topic: e.Queue.Topic, BrokerName: e.Queue.BrokerName, QueueID: e.Queue.QueueID,
				MinOffset: e.Value.MinOffset, MaxOffset: e.Value.MaxOffset, LastUpdateTimestamp: e.Value.LastUpdateTimestamp})
		}
		return nil
	})
	sortRows(rows, func(r queueStatus) string { return fmt.Sprintf("%s\x00%s\x00%010d", r.Topic, r.BrokerName, r.QueueID) })
	return rows, err
}

// allBrokersFlags declares --all and --namesrv for a command that asks
// --broker, or every master broker of a route. It returns the name
// server to ask for the route, "" without --all.
func allBrokersFlags(fs *pflag.FlagSet) func() string {
	all := fs.Bool("all", false, "ask every master broker of the route on --namesrv, not only --broker")
	ns := namesrvFlag(fs)
	return func() string {
		if !*all {
			return ""
		}
		return *ns
	}
}

// eachBroker calls fn with --broker when namesrv is "", else with the
// address of every master broker of topic's route on namesrv. It goes on
// after a broker fails; when some did, the error is a *partialError, or
// the only error when every broker failed.
func eachBroker(ctx context.Context, s *adminSession, namesrv, topic string, fn func(addr string) error) error {
	addrs := []string{s.broker}
	if namesrv != "" {
		var rd remoting.TopicRouteData
		if err := s.invokeJSON(ctx, namesrv, remoting.GetRouteInfoByTopic, map[string]string{"topic": topic}, &rd); err != nil {
			return err
		}
		addrs = addrs[:0]
		for _, bd := range rd.BrokerDatas {
			if addr, ok := bd.BrokerAddrs[0]; ok {
				addrs = append(addrs, addr)
			}
		}
		slices.Sort(addrs)
	}
	var errs []error
	for _, addr := range addrs {
		if err := fn(addr); err != nil {
			errs = append(errs, err)
		}
	}
	switch {
	case len(errs) == 0:
		return nil
	case len(errs) == len(addrs):
		return errors.Join(errs...)
	}
	return &partialError{errs}
}

func printTopicStatus(w io.Writer, rows []queueStatus) error {
	var out [][]string
	var total int64
	for _, r := range rows {
		out = append(out, []string{r.Topic, r.BrokerName, fmt.Sprint(r.QueueID), fmt.Sprint(r.MinOffset), fmt.Sprint(r.MaxOffset), fmt.Sprint(r.MaxOffset - r.MinOffset), millis(r.LastUpdateTimestamp)})
		total += r.MaxOffset - r.MinOffset
	}
	if err := table(w, []string{"TOPIC", "BROKER", "QUEUE", "MIN OFFSET", "MAX OFFSET", "MESSAGES", "LAST UPDATED"}, out); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "\n%d queues, %d messages\n", len(rows), total)
	return err
}

// millis formats a store time in ms, "-" for none.
func millis(ms int64) string {
	if ms <= 0 {
		return "-"
	}
	return time.UnixMilli(ms).Format("2006-01-02T15:04:05.000Z07:00")
}

// topicConfigArg is the arguments of "topics create" and "topics update".
type topicConfigArg struct {
	Topic      string
	Create     bool
	Read       *int
	Write      *int
	Perm       *int
	Order      *bool
	Type       *string // the RocketMQ 5 message type; "" removes it
	LiteExp    *int    // a LITE topic's lite topic expiration, minutes; 0 removes it
	Namesrv    string
	Cluster    string // every master of this cluster, not --broker
	changedAny bool
}

func topicConfigArgs(create bool) func(fs *pflag.FlagSet) func() (any, error) {
	return func(fs *pflag.FlagSet) func() (any, error) {
		topic := fs.String("topic", "", "topic (required)")
		read := fs.Int("read-queues", 8, "queues consumers read")
		write := fs.Int("write-queues", 8, "queues producers write (at most --read-queues)")
		perm := fs.String("perm", "6", "permission: 6 or RW (read and write), 4 or R (read only), 2 or W (write only)")
		order := fs.Bool("order", false, "the topic is ordered")
		typ := fs.String("message-type", "", "what RocketMQ 5 clients may send: "+strings.Join(broker.MessageTypes, ", ")+` ("" for any)`)
		liteExp := fs.Duration("lite-expiration", 0, "a LITE topic's: delete a lite topic this long after its last message, in whole minutes (0: never)")
		cluster := clusterFlag(fs)
		ns := namesrvFlag(fs)
		return func() (any, error) {
			if *topic == "" {
				return nil, errors.New("--topic required")
			}
			a := topicConfigArg{Topic: *topic, Create: create, Cluster: *cluster, Namesrv: *ns}
			set := func(flag string) bool {
				ok := create || fs.Changed(flag)
				a.changedAny = a.changedAny || ok
				return ok
			}
			if set("read-queues") {
				a.Read = read
			}
			if set("write-queues") {
				a.Write = write
			}
			if set("perm") {
				p, err := parsePerm(*perm)
				if err != nil {
					return nil, err
				}
				a.Perm = &p
			}
			if set("order") {
				a.Order = order
			}
			if fs.Changed("message-type") {
				t := strings.ToUpper(*typ)
				if t != "" && !slices.Contains(broker.MessageTypes, t) {
					return nil, fmt.Errorf("--message-type %q: want one of %s", *typ, strings.Join(broker.MessageTypes, ", "))
				}
				a.Type, a.changedAny = &t, true
			}
			if fs.Changed("lite-expiration") {
				if *liteExp < 0 {
					return nil, fmt.Errorf("--lite-expiration %v: want 0 (never) or more", *liteExp)
				}
				m := int((*liteExp + time.Minute - 1) / time.Minute)
				a.LiteExp, a.changedAny = &m, true
			}
			if !a.changedAny {
				return nil, errors.New("nothing to change: give --read-queues, --write-queues, --perm, --order, --message-type or --lite-expiration")
			}
			return a, nil
		}
	}
}

func parsePerm(s string) (int, error) {
	switch strings.ToUpper(s) {
	case "RW", "WR":
		return remoting.PermRead | remoting.PermWrite, nil
	case "R":
		return remoting.PermRead, nil
	case "W":
		return remoting.PermWrite, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 || n > 7 {
		return 0, fmt.Errorf("--perm %q: want 6, 4, 2 or RW, R, W", s)
	}
	return n, nil
}

// topicRow is a topic's configuration as "topics create|update" print it.
type topicRow struct {
	Addr           string `json:"addr"` // the broker
	Topic          string `json:"topic"`
	ReadQueueNums  int    `json:"readQueueNums"`
	WriteQueueNums int    `json:"writeQueueNums"`
	Perm           int    `json:"perm"`
	Order          bool   `json:"order"`
	MessageType    string `json:"messageType,omitempty"` // what RocketMQ 5 clients may send; "" any
	// LiteExpiration is a LITE topic's lite topic expiration, in minutes;
	// 0: never.
	LiteExpiration int `json:"liteTopicExpiration,omitempty"`
}

// brokerTopics reads the broker's topic table (GET_ALL_TOPIC_CONFIG).
func brokerTopics(ctx context.Context, s *adminSession, addr string) (map[string]remoting.TopicConfig, error) {
	var w remoting.TopicConfigWrapper
	if err := s.invokeJSON(ctx, addr, remoting.GetAllTopicConfig, nil, &w); err != nil {
		return nil, err
	}
	return w.TopicConfigTable, nil
}

// callTopicUpdate creates or changes the topic on --broker, or on every
// master of --cluster, as mqadmin updateTopic -b or -c.
func callTopicUpdate(ctx context.Context, s *adminSession, args any) (any, error) {
	a := args.(topicConfigArg)
	addrs, err := brokerAddrs(ctx, s, a.Namesrv, a.Cluster)
	if err != nil {
		return nil, err
	}
	rows := []topicRow{}
	var errs []error
	for _, addr := range addrs {
		row, err := updateTopicOn(ctx, s, addr, a)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		rows = append(rows, row)
	}
	switch {
	case len(errs) == len(addrs):
		return nil, errors.Join(errs...)
	case len(errs) > 0:
		return rows, &partialError{errs}
	}
	return rows, nil
}

// updateTopicOn creates or changes the topic on the broker at addr and
// returns what the broker holds afterwards.
func updateTopicOn(ctx context.Context, s *adminSession, addr string, a topicConfigArg) (topicRow, error) {
	topics, err := brokerTopics(ctx, s, addr)
	if err != nil {
		return topicRow{}, err
	}
	tc, exists := topics[a.Topic]
	switch {
	case exists && a.Create:
		return topicRow{}, fmt.Errorf("topic %s exists on %s (change it with topics update)", a.Topic, addr)
	case !exists:
		tc = remoting.TopicConfig{TopicName: a.Topic, ReadQueueNums: 8, WriteQueueNums: 8, Perm: remoting.PermRead | remoting.PermWrite, TopicFilterType: "SINGLE_TAG"}
	}
	if a.Read != nil {
		tc.ReadQueueNums = *a.Read
	}
	if a.Write != nil {
		tc.WriteQueueNums = *a.Write
	}
	if a.Perm != nil {
		tc.Perm = *a.Perm
	}
	if a.Order != nil {
		tc.Order = *a.Order
	}
	if tc.TopicFilterType == "" {
		tc.TopicFilterType = "SINGLE_TAG"
	}
	ext := map[string]string{
		"topic": a.Topic, "defaultTopic": remoting.AutoCreateTopicKey,
		"readQueueNums": strconv.Itoa(tc.ReadQueueNums), "writeQueueNums": strconv.Itoa(tc.WriteQueueNums),
		"perm": strconv.Itoa(tc.Perm), "topicFilterType": tc.TopicFilterType,
		"topicSysFlag": strconv.Itoa(tc.TopicSysFlag), "order": strconv.FormatBool(tc.Order),
	}
	var attrs []string
	switch {
	case a.Type != nil && *a.Type != "":
		attrs = append(attrs, "+message.type="+*a.Type)
	case a.Type != nil && exists && tc.MessageType != "":
		attrs = append(attrs, "-message.type")
	}
	switch {
	case a.LiteExp != nil && *a.LiteExp > 0:
		attrs = append(attrs, "+lite.topic.expiration="+strconv.Itoa(*a.LiteExp))
	case a.LiteExp != nil && exists && tc.LiteExpiration != 0:
		attrs = append(attrs, "-lite.topic.expiration")
	}
	if len(attrs) > 0 {
		ext["attributes"] = strings.Join(attrs, ",")
	}
	if _, err := s.invoke(ctx, addr, remoting.UpdateAndCreateTopic, ext, nil); err != nil {
		return topicRow{}, err
	}
	// Print what the broker holds now, not what was asked.
	if topics, err = brokerTopics(ctx, s, addr); err != nil {
		return topicRow{}, err
	}
	tc, ok := topics[a.Topic]
	if !ok {
		return topicRow{}, fmt.Errorf("%s answered UPDATE_AND_CREATE_TOPIC but does not list %s", addr, a.Topic)
	}
	return topicRow{Addr: addr, Topic: tc.TopicName, ReadQueueNums: tc.ReadQueueNums, WriteQueueNums: tc.WriteQueueNums, Perm: tc.Perm, Order: tc.Order, MessageType: tc.MessageType,
		LiteExpiration: tc.LiteExpiration}, nil
}

func printTopicRows(w io.Writer, rows []topicRow) error {
	var out [][]string
	for _, r := range rows {
		out = append(out, []string{r.Addr, r.Topic, fmt.Sprint(r.ReadQueueNums), fmt.Sprint(r.WriteQueueNums), permString(r.Perm), fmt.Sprint(r.Order), typeString(r.MessageType, r.LiteExpiration)})
	}
	return table(w, []string{"BROKER", "TOPIC", "READ", "WRITE", "PERM", "ORDER", "TYPE"}, out)
}

// typeString is a topic's TYPE column: its message type, a LITE topic's
// with its lite topic expiration.
func typeString(typ string, liteExp int) string {
	if liteExp > 0 {
		return fmt.Sprintf("%s (expire %v)", typ, time.Duration(liteExp)*time.Minute)
	}
	return cmpOr(typ, "-")
}

// deletedRow is one thing a delete command removed, and where.
type deletedRow struct {
	What   string `json:"what"`   // "topic" or "group"
	Name   string `json:"name"`   // its name
	Where  string `json:"where"`  // "broker" or "namesrv"
	Addr   string `json:"addr"`   // the address asked
	Result string `json:"result"` // "deleted", or the error
}

// callTopicDelete deletes the topic on --broker, or on every master of
// --cluster, then on the name server, as mqadmin deleteTopic does.
func callTopicDelete(ctx context.Context, s *adminSession, args any) (any, error) {
	a := args.(topicArg)
	addrs, err := brokerAddrs(ctx, s, a.Namesrv, a.Cluster)
	if err != nil {
		return nil, err
	}
	rows := []deletedRow{}
	var errs []error
	del := func(where, addr string, code int16) {
		row := deletedRow{What: "topic", Name: a.Topic, Where: where, Addr: addr, Result: "deleted"}
		if _, err := s.invoke(ctx, addr, code, map[string]string{"topic": a.Topic}, nil); err != nil {
			row.Result = "failed"
			errs = append(errs, err)
		}
		rows = append(rows, row)
	}
	for _, addr := range addrs {
		del("broker", addr, remoting.DeleteTopicInBroker)
	}
	if len(errs) > 0 {
		// The route stays while a broker keeps the topic.
		return rows, &partialError{errs}
	}
	if a.Namesrv != "" {
		del("namesrv", a.Namesrv, remoting.DeleteTopicInNamesrv)
	}
	if len(errs) > 0 {
		return rows, &partialError{errs}
	}
	return rows, nil
}

func printDeleted(w io.Writer, rows []deletedRow) error {
	var out [][]string
	for _, r := range rows {
		out = append(out, []string{r.What, r.Name, r.Where, r.Addr, r.Result})
	}
	return table(w, []string{"WHAT", "NAME", "FROM", "ADDR", "RESULT"}, out)
}
