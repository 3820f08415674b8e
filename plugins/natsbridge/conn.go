package natsbridge

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// connect dials NATS without waiting for a server: the connection retries
// in the background forever, and keeps nothing buffered while it is down
// (the outbox is the buffer), so a publish then fails at once.
func (b *Bridge) connect() (*nats.Conn, error) {
	o := &b.opts
	opts := []nats.Option{
		nats.Name(o.Name),
		nats.MaxReconnects(-1),
		nats.ReconnectBufSize(-1),
		nats.RetryOnFailedConnect(true),
		nats.ReconnectWait(o.ReconnectWait),
		nats.NoCallbacksAfterClientClose(),
		nats.ConnectHandler(func(nc *nats.Conn) {
			b.markUp()
			b.log.Info("connected to NATS", "url", nc.ConnectedUrlRedacted())
			signal(b.reconnected)
		}),
		nats.ReconnectHandler(func(nc *nats.Conn) {
			b.markUp()
			b.log.Info("reconnected to NATS", "url", nc.ConnectedUrlRedacted())
			signal(b.reconnected)
		}),
		nats.DisconnectErrHandler(func(nc *nats.Conn, err error) {
			b.markDown()
			if err != nil {
				b.log.Warn("disconnected from NATS; events wait in the outbox until it is back", "err", err)
			}
		}),
		nats.ErrorHandler(func(nc *nats.Conn, sub *nats.Subscription, err error) {
			b.log.Warn("NATS error", "err", err)
		}),
	}
	var errs []error
	fileErr := func(what, p string) {
		if _, err := os.Stat(p); err != nil {
			errs = append(errs, fmt.Errorf("natsbridge: %s: %w", what, err))
		}
	}
	switch {
	case o.CredsFile != "":
		fileErr("credentials file", o.CredsFile)
		opts = append(opts, nats.UserCredentials(o.CredsFile))
	case o.NKeySeedFile != "":
		opt, err := nats.NkeyOptionFromSeed(o.NKeySeedFile)
		if err != nil {
			errs = append(errs, fmt.Errorf("natsbridge: nkey seed file: %w", err))
		}
		opts = append(opts, opt)
	case o.Token != "":
		opts = append(opts, nats.Token(o.Token))
	case o.User != "":
		opts = append(opts, nats.UserInfo(o.User, o.Password))
	}
	if o.TLS.on() {
		cfg, err := tlsConfig(o.TLS)
		if err != nil {
			errs = append(errs, err)
		}
		opts = append(opts, nats.Secure(cfg))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	nc, err := nats.Connect(strings.Join(o.URLs, ","), opts...)
	if err != nil {
		return nil, fmt.Errorf("natsbridge: connect: %w", err)
	}
	return nc, nil
}

func tlsConfig(t TLSOptions) (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: t.ServerName, InsecureSkipVerify: t.InsecureSkipVerify}
	if t.CAFile != "" {
		pem, err := os.ReadFile(t.CAFile)
		if err != nil {
			return nil, fmt.Errorf("natsbridge: TLS CA file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("natsbridge: TLS CA file %s holds no PEM certificate", t.CAFile)
		}
		cfg.RootCAs = pool
	}
	if t.CertFile != "" {
		cert, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("natsbridge: TLS client certificate: %w", err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg, nil
}

// streamConfig is the stream Provision creates.
func (b *Bridge) streamConfig() jetstream.StreamConfig {
	o := &b.opts
	base := o.SubjectPrefix + "." + EscapeToken(o.Cluster) + "."
	storage := jetstream.FileStorage
	if o.StreamMemory {
		storage = jetstream.MemoryStorage
	}
	return jetstream.StreamConfig{
		Name:        o.Stream,
		Description: "rmq-go retry and dead-letter events of cluster " + o.Cluster,
		// Not prefix.cluster.>: the resend service's subject lives there
		// too, and a stream capturing requests would answer them itself.
		Subjects:   []string{base + "retry.>", base + "dlq.>"},
		Retention:  jetstream.LimitsPolicy,
		MaxAge:     o.StreamMaxAge,
		Duplicates: o.DuplicateWindow,
		Storage:    storage,
		Replicas:   o.StreamReplicas,
	}
}

// provision creates or updates the stream, once per Start.
func (b *Bridge) provision() error {
	if !b.opts.Provision || b.provisioned {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), b.opts.PublishTimeout)
	defer cancel()
	if _, err := b.js.CreateOrUpdateStream(ctx, b.streamConfig()); err != nil {
		return fmt.Errorf("provision stream %s: %w", b.opts.Stream, err)
	}
	b.provisioned = true
	b.log.Info("stream provisioned", "stream", b.opts.Stream, "max_age", b.opts.StreamMaxAge, "duplicate_window", b.opts.DuplicateWindow)
	return nil
}

// signal wakes whoever waits on a 1-buffered channel, without blocking.
func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}
