package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/rmq-go/rmq/core/broker"
	"github.com/rmq-go/rmq/core/store"
	"github.com/rmq-go/rmq/internal/server"
)

// fileConfig is the YAML config file. Every key is optional; unknown keys
// are errors. Flags override it.
type fileConfig struct {
	Listen               string        `yaml:"listen"`
	Advertise            string        `yaml:"advertise"`
	NamesrvListen        *string       `yaml:"namesrvListen"`
	Namesrv              []string      `yaml:"namesrv"`
	DataDir              string        `yaml:"dataDir"`
	Flush                string        `yaml:"flush"`
	LogLevel             string        `yaml:"logLevel"`
	DelayLevels          string        `yaml:"delayLevels"`
	MaxTimerDelay        time.Duration `yaml:"maxTimerDelay"`
	BrokerName           string        `yaml:"brokerName"`
	ClusterName          string        `yaml:"clusterName"`
	AutoCreateTopic      *bool         `yaml:"autoCreateTopic"`
	DefaultTopicQueues   int           `yaml:"defaultTopicQueueNums"`
	EnablePropertyFilter *bool         `yaml:"enablePropertyFilter"`
	MaxMessageSize       byteSize      `yaml:"maxMessageSize"`
	Store                storeConfig   `yaml:"store"`
	Topics               []topicConfig `yaml:"topics"`
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
