package main

import (
	"fmt"
	"path/filepath"
	"time"

	"github.com/rmq-go/rmq/internal/server"
	"github.com/rmq-go/rmq/plugins/natsbridge"
)

// bridgeConfig is the natsBridge section of the config file: the
// section's presence turns the bridge on (unless enabled is false). Zero
// values take natsbridge.Options' defaults.
type bridgeConfig struct {
	Enabled        *bool         `yaml:"enabled"`
	URLs           []string      `yaml:"urls"`
	Name           string        `yaml:"name"`
	CredsFile      string        `yaml:"credsFile"`
	NKeySeedFile   string        `yaml:"nkeySeedFile"`
	Token          string        `yaml:"token"`
	User           string        `yaml:"user"`
	Password       string        `yaml:"password"`
	TLS            natsTLSConfig `yaml:"tls"`
	Mode           string        `yaml:"mode"`
	Stream         string        `yaml:"stream"`
	Provision      bool          `yaml:"provision"`
	StreamMaxAge   time.Duration `yaml:"streamMaxAge"`
	DuplicateWin   time.Duration `yaml:"duplicateWindow"`
	StreamReplicas int           `yaml:"streamReplicas"`
	StreamMemory   bool          `yaml:"streamMemory"`
	SubjectPrefix  string        `yaml:"subjectPrefix"`
	Cluster        string        `yaml:"cluster"`
	Kinds          []string      `yaml:"kinds"`
	IncludeGroups  []string      `yaml:"includeGroups"`
	ExcludeGroups  []string      `yaml:"excludeGroups"`
	IncludeTopics  []string      `yaml:"includeTopics"`
	ExcludeTopics  []string      `yaml:"excludeTopics"`
	Properties     []string      `yaml:"properties"`
	BodyCap        byteSize      `yaml:"bodyCap"`
	OmitBody       bool          `yaml:"omitBody"`
	MaxInFlight    int           `yaml:"maxInFlight"`
	PublishTimeout time.Duration `yaml:"publishTimeout"`
	CursorInterval time.Duration `yaml:"cursorInterval"`
	ReconnectWait  time.Duration `yaml:"reconnectWait"`
	Resend         bool          `yaml:"resend"`
	ResendKeyTTL   time.Duration `yaml:"resendKeyTTL"`
	// OutboxMaxBytes bounds the broker's outbox of events (default 1 GiB).
	OutboxMaxBytes byteSize `yaml:"outboxMaxBytes"`
}

type natsTLSConfig struct {
	Enabled            bool   `yaml:"enabled"`
	CAFile             string `yaml:"caFile"`
	CertFile           string `yaml:"certFile"`
	KeyFile            string `yaml:"keyFile"`
	ServerName         string `yaml:"serverName"`
	InsecureSkipVerify bool   `yaml:"insecureSkipVerify"`
}

// options maps the section onto the bridge's options; nil when the bridge
// is off. Relative file names start in dir, the config file's directory.
// The bridge checks the values itself when the broker starts.
func (c *bridgeConfig) options(dir string) (*server.BridgeOptions, error) {
	if c == nil || (c.Enabled != nil && !*c.Enabled) {
		return nil, nil
	}
	if len(c.URLs) == 0 {
		return nil, fmt.Errorf("config: natsBridge.urls: at least one NATS URL is required")
	}
	if c.OmitBody && c.BodyCap != 0 {
		return nil, fmt.Errorf("config: natsBridge: omitBody and bodyCap contradict each other")
	}
	o := &server.BridgeOptions{
		URLs: c.URLs, Name: c.Name,
		CredsFile: c.CredsFile, NKeySeedFile: c.NKeySeedFile, Token: c.Token, User: c.User, Password: c.Password,
		TLS: natsbridge.TLSOptions{Enabled: c.TLS.Enabled, CAFile: c.TLS.CAFile, CertFile: c.TLS.CertFile, KeyFile: c.TLS.KeyFile,
			ServerName: c.TLS.ServerName, InsecureSkipVerify: c.TLS.InsecureSkipVerify},
		Mode: natsbridge.Mode(c.Mode), Stream: c.Stream, Provision: c.Provision,
		StreamMaxAge: c.StreamMaxAge, DuplicateWindow: c.DuplicateWin, StreamReplicas: c.StreamReplicas, StreamMemory: c.StreamMemory,
		SubjectPrefix: c.SubjectPrefix, Cluster: c.Cluster, Kinds: c.Kinds,
		IncludeGroups: c.IncludeGroups, ExcludeGroups: c.ExcludeGroups, IncludeTopics: c.IncludeTopics, ExcludeTopics: c.ExcludeTopics,
		Properties: c.Properties, BodyCap: int(c.BodyCap), MaxInFlight: c.MaxInFlight,
		PublishTimeout: c.PublishTimeout, CursorInterval: c.CursorInterval, ReconnectWait: c.ReconnectWait,
		Resend: c.Resend, ResendKeyTTL: c.ResendKeyTTL,
	}
	if c.OmitBody {
		o.BodyCap = -1
	}
	for _, p := range []*string{&o.CredsFile, &o.NKeySeedFile, &o.TLS.CAFile, &o.TLS.CertFile, &o.TLS.KeyFile} {
		if *p != "" && dir != "" && !filepath.IsAbs(*p) {
			*p = filepath.Join(dir, *p)
		}
	}
	return o, nil
}
