package client

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/rmq-go/rmq/core/remoting"
)

// ClientOptions configures the connection side that producers and
// consumers of one process share: the name servers, the client id and the
// periodic work of the client instance. The zero value of each field
// means its default, except NameServers, which is required.
type ClientOptions struct {
	// NameServers are the name server addresses, host:port. Required.
	NameServers []string
	// InstanceName is the second half of the client id (IP@InstanceName).
	// Producers and consumers with the same client id share one client
	// instance: its connections, route table and heartbeats. Default: the
	// process id.
	InstanceName string
	// ClientIP is the first half of the client id. Default: the first
	// non-loopback IPv4 address of the host, else 127.0.0.1.
	ClientIP string
	// RequestTimeout bounds a request that has no deadline of its own
	// (routes, heartbeats, offsets, locks); default 3 s.
	RequestTimeout time.Duration
	// PollNameServerInterval is how often routes are refreshed; default 30 s.
	PollNameServerInterval time.Duration
	// HeartbeatInterval is how often every broker gets a heartbeat;
	// default 30 s.
	HeartbeatInterval time.Duration
	// Logger receives the client's logs; default slog.Default().
	Logger *slog.Logger
	// TLS, if set, makes every connection, to name servers and brokers,
	// TLS with this config (remoting.ClientOptions.TLS); an empty
	// ServerName is taken from the address dialled. Producers and
	// consumers that share a client id share the first one's connections,
	// so give a different InstanceName to one that needs other TLS
	// settings. Nil dials plain.
	TLS *tls.Config
}

// Defaults of ClientOptions.
const (
	DefaultRequestTimeout         = 3 * time.Second
	DefaultPollNameServerInterval = 30 * time.Second
	DefaultHeartbeatInterval      = 30 * time.Second
)

// withDefaults returns a copy of o with defaults filled in, or every
// problem found.
func (o ClientOptions) withDefaults() (ClientOptions, error) {
	var problems []string
	if len(o.NameServers) == 0 {
		problems = append(problems, "NameServers is empty")
	}
	for _, a := range o.NameServers {
		if _, _, err := net.SplitHostPort(a); err != nil {
			problems = append(problems, fmt.Sprintf("name server %q: %v", a, err))
		}
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"RequestTimeout", o.RequestTimeout}, {"PollNameServerInterval", o.PollNameServerInterval}, {"HeartbeatInterval", o.HeartbeatInterval}} {
		if d.v < 0 {
			problems = append(problems, fmt.Sprintf("%s %v is negative", d.name, d.v))
		}
	}
	if strings.Contains(o.InstanceName, "@") {
		problems = append(problems, fmt.Sprintf("InstanceName %q contains @", o.InstanceName))
	}
	if len(problems) > 0 {
		return o, errors.New("client: invalid ClientOptions: " + strings.Join(problems, "; "))
	}
	o.NameServers = slices.Clone(o.NameServers)
	if o.InstanceName == "" {
		o.InstanceName = strconv.Itoa(os.Getpid())
	}
	if o.ClientIP == "" {
		o.ClientIP = remoting.HostIPv4().String()
	}
	if o.RequestTimeout == 0 {
		o.RequestTimeout = DefaultRequestTimeout
	}
	if o.PollNameServerInterval == 0 {
		o.PollNameServerInterval = DefaultPollNameServerInterval
	}
	if o.HeartbeatInterval == 0 {
		o.HeartbeatInterval = DefaultHeartbeatInterval
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return o, nil
}

// clientID is the id brokers know this client by.
func (o ClientOptions) clientID() string { return o.ClientIP + "@" + o.InstanceName }
