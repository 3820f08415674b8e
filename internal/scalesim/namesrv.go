package scalesim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rmq-go/rmq/core/namesrv"
	"github.com/rmq-go/rmq/core/remoting"
	"github.com/rmq-go/rmq/internal/cputime"
)

// Defaults for Options fields left zero.
const (
	DefaultTopics        = 1000
	DefaultQueues        = 8
	DefaultRegistrations = 200
	DefaultRouteQueries  = 2000
)

// Options configures one name-server run. Zero means the default.
type Options struct {
	// Sets is the number of broker sets; default 1. Only a set's master
	// registers, as this project's brokers do (brokerId 0).
	Sets int
	// Topics is how many topics every set holds; default 1,000. Every
	// topic lives on every set, so a route names all Sets sets.
	Topics int
	// Queues is each topic's read and write queue count on each set;
	// default 8.
	Queues int
	// Registrations is how many full registrations are timed, taken by
	// the sets in turn; default 200.
	Registrations int
	// RouteQueries is how many route lookups are timed; default 2,000.
	RouteQueries int
	// Workers is how many requests are in flight at once; default
	// GOMAXPROCS.
	Workers int
}

func (o Options) withDefaults() Options {
	if o.Sets == 0 {
		o.Sets = 1
	}
	if o.Topics == 0 {
		o.Topics = DefaultTopics
	}
	if o.Queues == 0 {
		o.Queues = DefaultQueues
	}
	if o.Registrations == 0 {
		o.Registrations = DefaultRegistrations
	}
	if o.RouteQueries == 0 {
		o.RouteQueries = DefaultRouteQueries
	}
	if o.Workers == 0 {
		o.Workers = runtime.GOMAXPROCS(0)
	}
	return o
}

// Result is what one run measured.
type Result struct {
	Sets, Topics, Queues int
	// RegisterBytes is one REGISTER_BROKER frame, header and body.
	RegisterBytes int
	// RegisterCPU is process CPU per registration against the name server,
	// sender and loopback included; RegisterFloorCPU the same against a
	// bare remoting server that answers at once.
	RegisterCPU, RegisterFloorCPU time.Duration
	// RouteBytes is the body of the route of a topic held by every set;
	// RouteFrameBytes the whole response frame.
	RouteBytes, RouteFrameBytes int
	// RouteCPU and RouteFloorCPU are process CPU per route lookup, against
	// the name server and against the floor.
	RouteCPU, RouteFloorCPU time.Duration
	// TableHeap is the live heap the name server's tables take once every
	// set has registered: the drop in live heap when all sets unregister.
	TableHeap int64
}

// RegisterServerCPU is the name server's own CPU per registration:
// RegisterCPU less the floor.
func (r Result) RegisterServerCPU() time.Duration { return max(0, r.RegisterCPU-r.RegisterFloorCPU) }

// RouteServerCPU is the name server's own CPU per route lookup.
func (r Result) RouteServerCPU() time.Duration { return max(0, r.RouteCPU-r.RouteFloorCPU) }

// brokerSet is one simulated set: what its master registers.
type brokerSet struct {
	name, addr string
	body       []byte
	cl         *remoting.Client
}

// SetName and SetAddr are set i's broker name and master address. Both
// have a fixed width, so every set adds the same bytes to a route.
func SetName(i int) string { return fmt.Sprintf("set-%03d", i) }

// SetAddr is set i's master address (for i < 10,000).
func SetAddr(i int) string { return fmt.Sprintf("192.168.%d.%d:10911", 100+i/100, 100+i%100) }

// TopicName is topic i's name.
func TopicName(i int) string { return fmt.Sprintf("topic-%04d", i) }

// registrationBody is what a master with these topics registers, encoded
// as core/broker encodes it.
func registrationBody(topics, queues int) ([]byte, error) {
	table := make(map[string]remoting.TopicConfig, topics)
	for i := range topics {
		name := TopicName(i)
		table[name] = remoting.TopicConfig{
			TopicName: name, ReadQueueNums: queues, WriteQueueNums: queues,
			Perm: remoting.PermRead | remoting.PermWrite, TopicFilterType: "SINGLE_TAG",
		}
	}
	return json.Marshal(remoting.RegisterBrokerBody{
		TopicConfigSerializeWrapper: remoting.TopicConfigWrapper{
			TopicConfigTable: table,
			DataVersion:      remoting.DataVersion{Timestamp: 1_700_000_000_000, Counter: int64(topics)},
		},
		FilterServerList: []string{},
	})
}

// registerRequest is set s's full REGISTER_BROKER, with core/broker's
// header fields.
func (s *brokerSet) registerRequest() *remoting.Command {
	return remoting.NewRequest(remoting.RegisterBroker, map[string]string{
		"brokerName":   s.name,
		"brokerAddr":   s.addr,
		"clusterName":  "DefaultCluster",
		"haServerAddr": "",
		"brokerId":     "0",
		"compressed":   "false",
		"incremental":  "false",
	}, s.body)
}

func routeRequest(topic string) *remoting.Command {
	return remoting.NewRequest(remoting.GetRouteInfoByTopic, map[string]string{"topic": topic}, nil)
}

// Run starts a name server and a floor server, drives o.Sets simulated
// sets and route lookups against both, and reports what it measured.
func Run(o Options) (Result, error) {
	o = o.withDefaults()
	res := Result{Sets: o.Sets, Topics: o.Topics, Queues: o.Queues}
	quiet := slog.New(slog.DiscardHandler)

	body, err := registrationBody(o.Topics, o.Queues)
	if err != nil {
		return res, err
	}
	sets := make([]*brokerSet, o.Sets)
	for i := range sets {
		// One connection per master, as in a cluster. The body is shared:
		// every set holds the same topics.
		sets[i] = &brokerSet{name: SetName(i), addr: SetAddr(i), body: body, cl: remoting.NewClient(remoting.ClientOptions{})}
		defer sets[i].cl.Close()
	}
	frame, err := remoting.AppendFrame(nil, sets[0].registerRequest())
	if err != nil {
		return res, err
	}
	res.RegisterBytes = len(frame)

	ns := namesrv.New(namesrv.Options{BrokerExpiry: time.Hour, DisableRetryRoutes: true, Logger: quiet})
	nsAddr, stopNS, err := listen(ns.Serve, ns.Shutdown)
	if err != nil {
		return res, err
	}
	defer stopNS()

	register := func(addr string) func(i int) error {
		return func(i int) error {
			s := sets[i%len(sets)]
			resp, err := s.cl.Invoke(context.Background(), addr, s.registerRequest())
			if err != nil {
				return err
			}
			if resp.Code != remoting.Success {
				return fmt.Errorf("register %s: code %d: %s", s.name, resp.Code, resp.Remark)
			}
			return nil
		}
	}
	// Every set registers once, which also opens its connection.
	if err := drive(len(sets), o.Workers, register(nsAddr)); err != nil {
		return res, err
	}

	// The route of a topic every set holds, checked once.
	topic := TopicName(o.Topics / 2)
	routers := make([]*remoting.Client, o.Workers)
	for i := range routers {
		routers[i] = remoting.NewClient(remoting.ClientOptions{})
		defer routers[i].Close()
	}
	resp, err := routers[0].Invoke(context.Background(), nsAddr, routeRequest(topic))
	if err != nil {
		return res, err
	}
	if err := checkRoute(resp, o); err != nil {
		return res, err
	}
	routeBody := resp.Body
	res.RouteBytes = len(routeBody)
	if frame, err = remoting.AppendFrame(frame[:0], resp); err != nil {
		return res, err
	}
	res.RouteFrameBytes = len(frame)

	route := func(addr string, want int) func(i int) error {
		return func(i int) error {
			resp, err := routers[i%len(routers)].Invoke(context.Background(), addr, routeRequest(topic))
			if err != nil {
				return err
			}
			if resp.Code != remoting.Success || len(resp.Body) != want {
				return fmt.Errorf("route %s: code %d, %d bytes, want %d", topic, resp.Code, len(resp.Body), want)
			}
			return nil
		}
	}
	if res.RegisterCPU, err = cpuPer(o.Registrations, o.Workers, register(nsAddr)); err != nil {
		return res, err
	}
	if res.RouteCPU, err = cpuPer(o.RouteQueries, o.Workers, route(nsAddr, len(routeBody))); err != nil {
		return res, err
	}

	// The tables: live heap with every set registered, less live heap
	// after every set unregistered. Connections stay open throughout.
	full := liveHeap()
	err = drive(len(sets), o.Workers, func(i int) error {
		s := sets[i]
		_, err := s.cl.Invoke(context.Background(), nsAddr, remoting.NewRequest(remoting.UnregisterBroker,
			map[string]string{"brokerName": s.name, "brokerAddr": s.addr, "clusterName": "DefaultCluster", "brokerId": "0"}, nil))
		return err
	})
	if err != nil {
		return res, err
	}
	res.TableHeap = full - liveHeap()

	// The floor: the same requests, answered at once.
	fs := remoting.NewServer(remoting.ServerOptions{Logger: quiet})
	fs.Handle(remoting.RegisterBroker, func(_ *remoting.Conn, req *remoting.Command) *remoting.Command {
		resp := remoting.NewResponse(req, remoting.Success, "")
		resp.Set("haServerAddr", "")
		resp.Set("masterAddr", req.Get("brokerAddr"))
		return resp
	})
	fs.Handle(remoting.GetRouteInfoByTopic, func(_ *remoting.Conn, req *remoting.Command) *remoting.Command {
		resp := remoting.NewResponse(req, remoting.Success, "")
		resp.Body = routeBody
		return resp
	})
	floorAddr, stopFloor, err := listen(fs.Serve, fs.Shutdown)
	if err != nil {
		return res, err
	}
	defer stopFloor()
	if err := drive(len(sets), o.Workers, register(floorAddr)); err != nil {
		return res, err
	}
	if res.RegisterFloorCPU, err = cpuPer(o.Registrations, o.Workers, register(floorAddr)); err != nil {
		return res, err
	}
	if res.RouteFloorCPU, err = cpuPer(o.RouteQueries, o.Workers, route(floorAddr, len(routeBody))); err != nil {
		return res, err
	}
	return res, nil
}

// checkRoute checks that a route names every set once, with its master
// and the topic's queues.
func checkRoute(resp *remoting.Command, o Options) error {
	if resp.Code != remoting.Success {
		return fmt.Errorf("route: code %d: %s", resp.Code, resp.Remark)
	}
	var r remoting.TopicRouteData
	if err := json.Unmarshal(resp.Body, &r); err != nil {
		return fmt.Errorf("route: %w", err)
	}
	if len(r.QueueDatas) != o.Sets || len(r.BrokerDatas) != o.Sets {
		return fmt.Errorf("route: %d queue datas and %d broker datas, want %d of each", len(r.QueueDatas), len(r.BrokerDatas), o.Sets)
	}
	for i := range o.Sets {
		q, b := r.QueueDatas[i], r.BrokerDatas[i]
		if q.BrokerName != SetName(i) || q.ReadQueueNums != o.Queues || q.WriteQueueNums != o.Queues {
			return fmt.Errorf("route: queue data %d is %+v, want %s with %d queues", i, q, SetName(i), o.Queues)
		}
		if b.BrokerName != SetName(i) || len(b.BrokerAddrs) != 1 || b.BrokerAddrs[0] != SetAddr(i) {
			return fmt.Errorf("route: broker data %d is %+v, want %s at %s", i, b, SetName(i), SetAddr(i))
		}
	}
	return nil
}

// listen serves on a fresh loopback port and returns its address and a
// function that shuts the server down.
func listen(serve func(net.Listener) error, shutdown func(context.Context) error) (string, func(), error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = serve(ln)
	}()
	return ln.Addr().String(), func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = shutdown(ctx)
		<-done
	}, nil
}

// drive calls do(0) … do(n-1) from workers goroutines and returns the
// first error.
func drive(n, workers int, do func(i int) error) error {
	var (
		next  atomic.Int64
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
	)
	for range min(workers, n) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				if err := do(i); err != nil {
					mu.Lock()
					first = errors.Join(first, err)
					mu.Unlock()
					next.Store(int64(n)) // stop the others
					return
				}
			}
		}()
	}
	wg.Wait()
	return first
}

// cpuPer is the process CPU per call of drive(n, workers, do).
func cpuPer(n, workers int, do func(i int) error) (time.Duration, error) {
	runtime.GC()
	cpu0 := cputime.Process()
	if err := drive(n, workers, do); err != nil {
		return 0, err
	}
	return (cputime.Process() - cpu0) / time.Duration(n), nil
}

// liveHeap is the heap held by reachable objects, after a full GC.
func liveHeap() int64 {
	var ms runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}
