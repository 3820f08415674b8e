package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/rmq-go/rmq/core/cluster"
	"github.com/rmq-go/rmq/core/remoting"
	"github.com/rmq-go/rmq/internal/server"
)

// The cluster overview of mqadmin clusterList.
func init() {
	addAdminCommands(adminCommand{
		group: "cluster", verb: "list", summary: "List the name server's brokers: version, topics, connections, stored (GET_BROKER_CLUSTER_INFO, GET_BROKER_RUNTIME_INFO)",
		args: func(fs *pflag.FlagSet) func() (any, error) {
			ns := namesrvFlag(fs)
			return func() (any, error) { return *ns, nil }
		},
		call:  callClusterList,
		print: printAs(printCluster),
	})
}

// clusterBroker is one broker address of "cluster list". The figures are
// zero when the broker did not answer.
type clusterBroker struct {
	Cluster        string            `json:"cluster"`    // "" without a name server
	BrokerName     string            `json:"brokerName"` // "" without a name server
	BrokerID       int64             `json:"brokerId"`   // 0 is the master
	Addr           string            `json:"addr"`
	GRPCAddr       string            `json:"grpcAddr,omitempty"` // the gRPC endpoint it registered, if any
	Version        string            `json:"version"`            // brokerVersionDesc
	Topics         int               `json:"topics"`
	Connections    int64             `json:"connections"`     // connectionCount, -1 when not reported
	BootTimestamp  int64             `json:"bootTimestamp"`   // ms
	MsgPutTotal    int64             `json:"msgPutTotal"`     // msgPutTotalTodayNow: messages stored since the broker started
	CommitLogBytes int64             `json:"commitLogBytes"`  // commitLogMaxOffset − commitLogMinOffset
	Runtime        map[string]string `json:"runtime"`         // GET_BROKER_RUNTIME_INFO as answered
	Error          string            `json:"error,omitempty"` // why the figures are missing
}

func callClusterList(ctx context.Context, s *adminSession, args any) (any, error) {
	namesrv := args.(string)
	rows := []clusterBroker{}
	if namesrv == "" {
		rows = append(rows, clusterBroker{Addr: s.broker})
	} else {
		var info remoting.ClusterInfo
		if err := s.invokeJSON(ctx, namesrv, remoting.GetBrokerClusterInfo, map[string]string{remoting.RouteGRPCAddrsField: "true"}, &info); err != nil {
			return nil, err
		}
		for _, cluster := range slices.Sorted(maps.Keys(info.ClusterAddrTable)) {
			names := slices.Sorted(slices.Values(info.ClusterAddrTable[cluster]))
			for _, name := range names {
				bd := info.BrokerAddrTable[name]
				for _, id := range slices.Sorted(maps.Keys(bd.BrokerAddrs)) {
					rows = append(rows, clusterBroker{Cluster: cluster, BrokerName: name, BrokerID: id, Addr: bd.BrokerAddrs[id], GRPCAddr: bd.GRPCAddrs[id]})
				}
			}
		}
	}
	var errs []error
	for i := range rows {
		if err := brokerFigures(ctx, s, &rows[i]); err != nil {
			rows[i].Error = err.Error()
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return rows, &partialError{errs}
	}
	return rows, nil
}

// brokerFigures fills a row from the broker's runtime info and topic table.
func brokerFigures(ctx context.Context, s *adminSession, b *clusterBroker) error {
	var kv remoting.KVTable
	if err := s.invokeJSON(ctx, b.Addr, remoting.GetBrokerRuntimeInfo, nil, &kv); err != nil {
		return err
	}
	num := func(key string, def int64) int64 {
		v, err := strconv.ParseInt(kv.Table[key], 10, 64)
		if err != nil {
			return def
		}
		return v
	}
	b.Runtime = kv.Table
	b.Version = kv.Table["brokerVersionDesc"]
	b.Connections = num("connectionCount", -1)
	b.BootTimestamp = num("bootTimestamp", 0)
	b.MsgPutTotal = num("msgPutTotalTodayNow", 0)
	b.CommitLogBytes = num("commitLogMaxOffset", 0) - num("commitLogMinOffset", 0)
	topics, err := brokerTopics(ctx, s, b.Addr)
	if err != nil {
		return err
	}
	b.Topics = len(topics)
	return nil
}

func printCluster(w io.Writer, rows []clusterBroker) error {
	var out [][]string
	for _, b := range rows {
		if b.Error != "" {
			out = append(out, []string{dash(b.Cluster), dash(b.BrokerName), fmt.Sprint(b.BrokerID), b.Addr, dash(b.GRPCAddr), "unreachable", "-", "-", "-", "-", "-"})
			continue
		}
		conns, uptime := "-", "-"
		if b.Connections >= 0 {
			conns = fmt.Sprint(b.Connections)
		}
		if b.BootTimestamp > 0 {
			uptime = time.Since(time.UnixMilli(b.BootTimestamp)).Truncate(time.Second).String()
		}
		out = append(out, []string{dash(b.Cluster), dash(b.BrokerName), fmt.Sprint(b.BrokerID), b.Addr, dash(b.GRPCAddr), dash(b.Version),
			fmt.Sprint(b.Topics), conns, fmt.Sprint(b.MsgPutTotal), fmt.Sprint(b.CommitLogBytes), uptime})
	}
	return table(w, []string{"CLUSTER", "BROKER", "BID", "ADDR", "GRPC", "VERSION", "TOPICS", "CONNS", "STORED", "LOG BYTES", "UPTIME"}, out)
}

// The members of a replicated broker set, from their HTTP endpoints.
func init() {
	addAdminCommands(adminCommand{
		group: "cluster", verb: "status", summary: "Show a replicated broker set: members, leader, raft commit and apply indexes, lag (each member's /cluster)",
		args: func(fs *pflag.FlagSet) func() (any, error) {
			members := fs.StringSlice("members", nil, "the set members' HTTP endpoints (host:port, repeatable or comma-separated)")
			return func() (any, error) {
				if len(*members) == 0 {
					return nil, fmt.Errorf("--members is required: the HTTP endpoint of each member of the set")
				}
				return *members, nil
			}
		},
		call:  callClusterStatus,
		print: printAs(printClusterStatus),
	})
}

// setMemberRow is one member of "cluster status"; Lag is counted from
// the highest commit index any member reported.
type setMemberRow struct {
	HTTP string `json:"http"`
	cluster.Status
	Serving string `json:"serving,omitempty"`
	GRPC    string `json:"grpc,omitempty"` // the member's gRPC address, when it listens for RocketMQ 5 clients
	Behind  uint64 `json:"behind"`
	Error   string `json:"error,omitempty"`
}

func callClusterStatus(ctx context.Context, _ *adminSession, args any) (any, error) {
	var rows []setMemberRow
	var errs []error
	var commit uint64
	for _, addr := range args.([]string) {
		row := setMemberRow{HTTP: addr}
		if err := getJSON(ctx, "http://"+addr+"/cluster", &row); err != nil {
			row.Error = err.Error()
			errs = append(errs, fmt.Errorf("%s: %w", addr, err))
		}
		commit = max(commit, row.CommitIndex)
		rows = append(rows, row)
	}
	for i := range rows {
		if rows[i].Error == "" && commit > rows[i].AppliedIndex {
			rows[i].Behind = commit - rows[i].AppliedIndex
		}
	}
	if len(errs) > 0 {
		return rows, &partialError{errs}
	}
	return rows, nil
}

// getJSON decodes the JSON answer of a GET.
func getJSON(ctx context.Context, url string, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fmt.Errorf("%s: %s", resp.Status, strings.TrimSpace(string(body)))
	}
	return json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(v)
}

func printClusterStatus(w io.Writer, rows []setMemberRow) error {
	var out [][]string
	for _, r := range rows {
		if r.Error != "" {
			out = append(out, []string{r.HTTP, "-", "-", "unreachable", "-", "-", "-", "-", "-", "-", "-", "-"})
			continue
		}
		state := r.State
		if r.Serving != "" {
			state += " (master at " + r.Serving + ")"
		}
		out = append(out, []string{r.HTTP, r.Set, r.Node, state, dash(r.Leader), fmt.Sprint(r.Term),
			fmt.Sprint(r.CommitIndex), fmt.Sprint(r.AppliedIndex), fmt.Sprint(r.Behind), dash(r.LastContact), dash(r.LogSpan), dash(r.GRPC)})
	}
	return table(w, []string{"HTTP", "SET", "NODE", "STATE", "LEADER", "TERM", "COMMIT", "APPLIED", "BEHIND", "LAST CONTACT", "LOG SPAN", "GRPC"}, out)
}

// Membership changes of a replicated set, asked of its leader's broker
// port (--broker); a member that does not lead answers with the leader's
// id (internal/server/cluster.go serves them).
func init() {
	addAdminCommands(
		adminCommand{
			group: "cluster", verb: "add-member", command: server.AddMemberCommand,
			summary: "Add a member to a replicated set, as a voter: start it first with --join and an empty data directory",
			args: func(fs *pflag.FlagSet) func() (any, error) {
				var a server.MemberArgs
				fs.StringVar(&a.ID, "id", "", "the new member's node id (required)")
				fs.StringVar(&a.Addr, "raft-addr", "", "the new member's raft address, host:port (required)")
				return func() (any, error) {
					if a.ID == "" || a.Addr == "" {
						return nil, fmt.Errorf("--id and --raft-addr are required")
					}
					return a, nil
				}
			},
			print: printAs(printMemberChange),
		},
		adminCommand{
			group: "cluster", verb: "remove-member", command: server.RemoveMemberCommand,
			summary: "Remove a member from a replicated set (the leader hands over leadership first if it is the one)",
			args: func(fs *pflag.FlagSet) func() (any, error) {
				var a server.MemberArgs
				fs.StringVar(&a.ID, "id", "", "the member's node id (required)")
				return func() (any, error) {
					if a.ID == "" {
						return nil, fmt.Errorf("--id is required")
					}
					return a, nil
				}
			},
			print: printAs(printMemberChange),
		},
		adminCommand{
			group: "cluster", verb: "transfer-leader", command: server.TransferLeaderCommand,
			summary: "Hand a replicated set's leadership to a member (--to), or to the most up-to-date other one",
			args: func(fs *pflag.FlagSet) func() (any, error) {
				var a server.MemberArgs
				fs.StringVar(&a.ID, "to", "", "the member to lead (default: any other)")
				return func() (any, error) { return a, nil }
			},
			print: printAs(printMemberChange),
		},
	)
}

// printMemberChange prints the membership as the answering member sees
// it after the change.
func printMemberChange(w io.Writer, st cluster.Status) error {
	var rows [][]string
	for _, m := range st.Member {
		role := "voter"
		if !m.Voter {
			role = "non-voter"
		}
		if m.ID == st.Leader {
			role += ", leader"
		}
		rows = append(rows, []string{m.ID, m.Addr, role})
	}
	return table(w, []string{"MEMBER", "RAFT ADDR", "ROLE"}, rows)
}
