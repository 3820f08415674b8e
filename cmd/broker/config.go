package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/rmq-go/rmq/core/broker"
	"github.com/rmq-go/rmq/core/store"
	"github.com/rmq-go/rmq/internal/server"
	"github.com/rmq-go/rmq/plugins/wasm"
)

// fileConfig is the YAML config file. Every key is optional; unknown keys
// are errors. Flags override it.
type fileConfig struct {
	Listen               string         `yaml:"listen"`
	Advertise            string         `yaml:"advertise"`
	NamesrvListen        *string        `yaml:"namesrvListen"`
	Namesrv              []string       `yaml:"namesrv"`
	DataDir              string         `yaml:"dataDir"`
	Flush                string         `yaml:"flush"`
	LogLevel             string         `yaml:"logLevel"`
	DelayLevels          string         `yaml:"delayLevels"`
	MaxTimerDelay        time.Duration  `yaml:"maxTimerDelay"`
	BrokerName           string         `yaml:"brokerName"`
	ClusterName          string         `yaml:"clusterName"`
	AutoCreateTopic      *bool          `yaml:"autoCreateTopic"`
	DefaultTopicQueues   int            `yaml:"defaultTopicQueueNums"`
	EnablePropertyFilter *bool          `yaml:"enablePropertyFilter"`
	MaxMessageSize       byteSize       `yaml:"maxMessageSize"`
	Store                storeConfig    `yaml:"store"`
	Topics               []topicConfig  `yaml:"topics"`
	Plugins              []pluginConfig `yaml:"plugins"`
	NATSBridge           *bridgeConfig  `yaml:"natsBridge"`

	dir string // the file's directory: relative module paths start there
}

type storeConfig struct {
	SegmentSize       byteSize      `yaml:"segmentSize"`
	FlushInterval     time.Duration `yaml:"flushInterval"`
	Retention         time.Duration `yaml:"retention"`
	RetentionInterval time.Duration `yaml:"retentionInterval"`
	DiskHighWater     float64       `yaml:"diskHighWater"`
	Prealloc          byteSize      `yaml:"prealloc"`
}

// topicConfig pre-creates a topic at startup.
type topicConfig struct {
	Name   string `yaml:"name"`
	Queues int    `yaml:"queues"`
	Perm   int    `yaml:"perm"`
	Order  bool   `yaml:"order"`
}

// byteSize is a size in bytes, written as a number or with a unit
// (KiB, MiB, GiB, or KB, MB, GB as powers of 1024 too).
type byteSize int64

func (b *byteSize) UnmarshalYAML(n *yaml.Node) error {
	v, err := parseByteSize(n.Value)
	if err != nil {
		return fmt.Errorf("line %d: %w", n.Line, err)
	}
	*b = byteSize(v)
	return nil
}

func parseByteSize(s string) (int64, error) {
	s = strings.TrimSpace(s)
	units := []struct {
		suffix string
		mult   int64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"KB", 1 << 10}, {"MB", 1 << 20}, {"GB", 1 << 30}, {"K", 1 << 10}, {"M", 1 << 20}, {"G", 1 << 30}, {"B", 1}}
	mult := int64(1)
	for _, u := range units {
		if strings.HasSuffix(s, u.suffix) {
			s, mult = strings.TrimSpace(strings.TrimSuffix(s, u.suffix)), u.mult
			break
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("bad size %q: want a number of bytes, optionally with KiB, MiB or GiB", s)
	}
	return n * mult, nil
}

// loadConfigFile reads a YAML config file strictly.
func loadConfigFile(path string) (fileConfig, error) {
	var fc fileConfig
	data, err := os.ReadFile(path)
	if err != nil {
		return fc, fmt.Errorf("config: %w", err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&fc); err != nil && !errors.Is(err, io.EOF) {
		return fc, fmt.Errorf("config %s: %w", path, err)
	}
	fc.dir = filepath.Dir(path)
	return fc, nil
}

// apply fills a server.Config from the file, before flags are applied.
func (fc fileConfig) apply(cfg *server.Config) error {
	if fc.Listen != "" {
		cfg.Listen = fc.Listen
	}
	if fc.Advertise != "" {
		cfg.Advertise = fc.Advertise
	}
	if fc.NamesrvListen != nil {
		cfg.NamesrvListen = *fc.NamesrvListen
	}
	if len(fc.Namesrv) > 0 {
		cfg.NameServers = fc.Namesrv
	}
	if fc.DataDir != "" {
		cfg.DataDir = fc.DataDir
	}
	if fc.Flush != "" {
		m, err := store.ParseFlushMode(fc.Flush)
		if err != nil {
			return err
		}
		cfg.Store.Flush = m
	}
	cfg.Broker.BrokerName = fc.BrokerName
	cfg.Broker.ClusterName = fc.ClusterName
	if fc.AutoCreateTopic != nil {
		cfg.Broker.DisableAutoCreateTopic = !*fc.AutoCreateTopic
	}
	if fc.EnablePropertyFilter != nil {
		cfg.Broker.DisablePropertyFilter = !*fc.EnablePropertyFilter
	}
	cfg.Broker.DefaultTopicQueueNums = fc.DefaultTopicQueues
	cfg.Broker.MaxMessageSize = int(fc.MaxMessageSize)
	cfg.Broker.MaxTimerDelay = fc.MaxTimerDelay
	if fc.DelayLevels != "" {
		levels, err := broker.ParseDelayLevels(fc.DelayLevels)
		if err != nil {
			return fmt.Errorf("config: delayLevels: %w", err)
		}
		cfg.Broker.DelayLevels = levels
	}
	cfg.Store.SegmentSize = int64(fc.Store.SegmentSize)
	cfg.Store.FlushInterval = fc.Store.FlushInterval
	cfg.Store.Retention = fc.Store.Retention
	cfg.Store.RetentionInterval = fc.Store.RetentionInterval
	cfg.Store.DiskHighWater = fc.Store.DiskHighWater
	cfg.Store.Prealloc = int64(fc.Store.Prealloc)
	var errs []error
	plugins, err := fc.plugins()
	errs = append(errs, err)
	cfg.Plugins = plugins
	bridge, err := fc.NATSBridge.options(fc.dir)
	errs = append(errs, err)
	cfg.NATSBridge = bridge
	if fc.NATSBridge != nil {
		cfg.Broker.OutboxMaxBytes = int64(fc.NATSBridge.OutboxMaxBytes)
	}
	for i, t := range fc.Topics {
		if err := broker.ValidateTopic(t.Name); err != nil {
			errs = append(errs, fmt.Errorf("config: topics[%d]: %w", i, err))
		}
		if t.Queues < 0 {
			errs = append(errs, fmt.Errorf("config: topics[%d] (%s): queues must not be negative", i, t.Name))
		}
	}
	return errors.Join(errs...)
}

// topics returns the topics to pre-create.
func (fc fileConfig) topics() []broker.TopicConfig {
	var out []broker.TopicConfig
	for _, t := range fc.Topics {
		q := t.Queues
		if q == 0 {
			q = 4
		}
		perm := t.Perm
		if perm == 0 {
			perm = 6
		}
		out = append(out, broker.TopicConfig{TopicName: t.Name, ReadQueueNums: q, WriteQueueNums: q, Perm: perm, Order: t.Order})
	}
	return out
}

// pluginConfig is one entry of the plugin list; it maps onto a
// server.Plugin (wasm.Options and the groups).
type pluginConfig struct {
	Name   string `yaml:"name"`
	Kind   string `yaml:"kind"`   // filter, allocate or txncheck
	Module string `yaml:"module"` // the .wasm file, relative to the config file's directory
	SHA256 string `yaml:"sha256"` // optional: refuse any other module
	// Config is passed to the module's broker_init: a string as its
	// bytes, any other value (a map, a list, a number) encoded as JSON.
	Config yaml.Node         `yaml:"config"`
	Env    map[string]string `yaml:"env"`
	// Trusted plugins run without a deadline; "trusted: false" bounds each
	// call by limits.deadline, at a cost in speed. Default true.
	Trusted *bool        `yaml:"trusted"`
	Limits  pluginLimits `yaml:"limits"`
	// ExpressionType is, for a filter, the subscription expression type it
	// serves (default: the name, upper-cased); TAG or SQL92 replace the
	// built-in filter.
	ExpressionType string `yaml:"expressionType"`
	// FailurePolicy is, for a filter, hold (default: the subscription waits
	// at the failed message) or open (the failed batch matches).
	FailurePolicy string `yaml:"failurePolicy"`
	// Groups are, for allocate, the consumer groups and, for txncheck, the
	// producer groups the plugin serves; none makes it the default.
	Groups []string `yaml:"groups"`
}

type pluginLimits struct {
	MemoryPages   uint32        `yaml:"memoryPages"`   // 64 KiB pages per instance; default 256
	Deadline      time.Duration `yaml:"deadline"`      // per call, untrusted only; default 100ms
	MaxBinarySize byteSize      `yaml:"maxBinarySize"` // default 32MiB
	PoolSize      int           `yaml:"poolSize"`      // instances; default GOMAXPROCS
	MaxFailures   int           `yaml:"maxFailures"`   // traps in a row that disable it; default 5
	RecycleAfter  int           `yaml:"recycleAfter"`  // calls per instance; default never
}

// plugins maps the plugin list onto the server's. It checks what only the
// file knows (the config value's encoding, which keys fit which kind);
// package wasm and the server check the rest when the list is applied,
// naming the plugin too.
func (fc fileConfig) plugins() ([]server.Plugin, error) {
	var (
		out  []server.Plugin
		errs []error
	)
	for i, pc := range fc.Plugins {
		bad := func(format string, args ...any) {
			errs = append(errs, fmt.Errorf("config: plugin %q (plugins[%d]): %s", pc.Name, i, fmt.Sprintf(format, args...)))
		}
		kind := wasm.Kind(pc.Kind)
		if pc.Module == "" {
			bad("module is required: the path of the .wasm file")
		}
		if kind != wasm.KindFilter && (pc.ExpressionType != "" || pc.FailurePolicy != "") {
			bad("expressionType and failurePolicy are for filter plugins, not %q", pc.Kind)
		}
		if kind == wasm.KindFilter && len(pc.Groups) > 0 {
			bad("groups are for allocate and txncheck plugins; a filter serves its expressionType")
		}
		untrusted := pc.Trusted != nil && !*pc.Trusted
		if !untrusted && pc.Limits.Deadline != 0 {
			bad("limits.deadline bounds untrusted plugins only; add trusted: false")
		}
		config, err := pluginConfigBytes(&pc.Config)
		if err != nil {
			bad("config: %v", err)
		}
		path := pc.Module
		if path != "" && !filepath.IsAbs(path) && fc.dir != "" {
			path = filepath.Join(fc.dir, path)
		}
		out = append(out, server.Plugin{
			Options: wasm.Options{
				Name:           pc.Name,
				Kind:           kind,
				ExpressionType: pc.ExpressionType,
				Path:           path,
				SHA256:         pc.SHA256,
				Config:         config,
				Env:            pc.Env,
				FailurePolicy:  wasm.Policy(pc.FailurePolicy),
				MaxMemoryPages: pc.Limits.MemoryPages,
				Untrusted:      untrusted,
				Deadline:       pc.Limits.Deadline,
				MaxBinarySize:  int64(pc.Limits.MaxBinarySize),
				PoolSize:       pc.Limits.PoolSize,
				MaxFailures:    pc.Limits.MaxFailures,
				RecycleAfter:   pc.Limits.RecycleAfter,
			},
			Groups: pc.Groups,
		})
	}
	return out, errors.Join(errs...)
}

// pluginConfigBytes encodes a plugin's config value for broker_init: nothing
// for no value, a string's own bytes, and JSON for anything else.
func pluginConfigBytes(n *yaml.Node) ([]byte, error) {
	if n.Kind == 0 {
		return nil, nil
	}
	if n.Kind == yaml.ScalarNode {
		switch n.ShortTag() {
		case "!!null":
			return nil, nil
		case "!!str":
			return []byte(n.Value), nil
		}
	}
	var v any
	if err := n.Decode(&v); err != nil {
		return nil, err
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("line %d: the value cannot be passed as JSON (%v); quote it to pass a string", n.Line, err)
	}
	return b, nil
}

// pluginSource re-reads the plugin list of the config file at path, for
// reloads. The whole file is parsed as strictly as at startup.
func pluginSource(path string) func() ([]server.Plugin, error) {
	return func() ([]server.Plugin, error) {
		fc, err := loadConfigFile(path)
		if err != nil {
			return nil, err
		}
		return fc.plugins()
	}
}
