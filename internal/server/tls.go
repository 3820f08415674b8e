package server

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
)

// TLS of the broker's port, the embedded name server's and the gRPC
// port: the tls: section of the config file. The certificate, its key and
// the client CA pool are loaded at Start (every problem reported) and
// again on reload (SIGHUP, the plugins.reload admin command); a reload
// that fails keeps the ones in force. Handshakes read the current set
// through GetConfigForClient, so a reload takes effect at the next
// handshake and open connections are untouched. Without certFile and
// keyFile the ports present a self-signed certificate the broker
// generates once and keeps in its data directory (tlscert.go).

// TLS modes (TLSOptions.Mode).
const (
	TLSDisabled   = "disabled"   // plain only; TLS clients are closed with a log line
	TLSPermissive = "permissive" // TLS and plain on the same ports: the default, as RocketMQ's
	TLSEnforcing  = "enforcing"  // TLS only; plain clients are closed with a log line

	// TLSOff and TLSOn are the earlier names of TLSDisabled and
	// TLSEnforcing, still accepted.
	TLSOff = "off"
	TLSOn  = "on"
)

// TLSOptions configures TLS (Config.TLS).
type TLSOptions struct {
	// Mode is disabled, permissive (the default) or enforcing
	// (TLSDisabled, TLSPermissive, TLSEnforcing; off and on are accepted
	// for disabled and enforcing). With enforcing, the broker also
	// registers with its name servers over TLS.
	Mode string `yaml:"mode"`
	// CertFile and KeyFile are the PEM certificate (chain) and private key
	// the ports present. Both empty: a self-signed certificate generated
	// at the first start and kept in the data directory's tls/ (a name
	// server alone without a dataDir generates one per start). When
	// CAFile is set, the certificate also serves as the broker's client
	// certificate toward name servers, so it needs the clientAuth usage
	// too (or none).
	CertFile string `yaml:"certFile" cfg:"path"`
	KeyFile  string `yaml:"keyFile" cfg:"path"`
	// CAFile, if set, is a PEM bundle of the authorities whose client
	// certificates are accepted: every TLS client must then present one
	// signed by them, or the broker's own certificate (plain clients in
	// permissive mode present none). It is also what the broker trusts
	// for its name servers' certificates, besides its own certificate;
	// without it, the system's roots.
	CAFile string `yaml:"caFile" cfg:"path"`
}

// tlsMode returns the canonical name of mode, the default for "".
func tlsMode(mode string) (string, error) {
	switch mode {
	case "", TLSPermissive:
		return TLSPermissive, nil
	case TLSDisabled, TLSOff:
		return TLSDisabled, nil
	case TLSEnforcing, TLSOn:
		return TLSEnforcing, nil
	}
	return "", fmt.Errorf("tls: mode %q: want disabled, permissive or enforcing", mode)
}

// tlsGate holds the loaded certificate and CA pool and builds the TLS
// configs of the ports and of the broker's name-server client from them.
type tlsGate struct {
	opts TLSOptions
	// generated is a self-signed certificate kept in memory only (a name
	// server alone without a data directory); nil when one is on file.
	generated *tls.Certificate
	cur       atomic.Pointer[tlsState]
	reloadMu  sync.Mutex // serializes reloads
}

// tlsState is one load of the files.
type tlsState struct {
	cert      *tls.Certificate
	clientCAs *x509.CertPool // nil without CAFile
	server    *tls.Config    // what a handshake on the ports uses
}

// newTLSGate loads opts' files, or reports every problem of them; nil when
// TLS is disabled. opts.Mode is canonical (tlsMode). Without certFile and
// keyFile it takes the self-signed certificate kept in dataDir/tls,
// generating it on the first start, or with dataDir empty one in memory;
// hosts are the names and addresses it is made for.
func newTLSGate(opts TLSOptions, dataDir string, hosts []string, log *slog.Logger) (*tlsGate, error) {
	if opts.Mode == TLSDisabled {
		return nil, nil
	}
	g := &tlsGate{opts: opts}
	switch {
	case opts.CertFile == "" && opts.KeyFile == "":
		var err error
		if g.opts.CertFile, g.opts.KeyFile, g.generated, err = selfSigned(dataDir, hosts, log); err != nil {
			return nil, err
		}
	case opts.CertFile == "":
		return nil, errors.New("tls: keyFile is set without certFile: give both, or neither for a self-signed certificate")
	case opts.KeyFile == "":
		return nil, errors.New("tls: certFile is set without keyFile: give both, or neither for a self-signed certificate")
	}
	st, err := g.load()
	if err != nil {
		return nil, err
	}
	g.cur.Store(st)
	return g, nil
}

// load reads the files into a new state.
func (g *tlsGate) load() (*tlsState, error) {
	var problems []error
	var cert tls.Certificate
	if g.generated != nil {
		cert = *g.generated
	} else if c, err := tls.LoadX509KeyPair(g.opts.CertFile, g.opts.KeyFile); err != nil {
		problems = append(problems, fmt.Errorf("tls: certificate %s with key %s: %w", g.opts.CertFile, g.opts.KeyFile, err))
	} else {
		cert = c
	}
	var pool *x509.CertPool
	if g.opts.CAFile != "" {
		pem, err := os.ReadFile(g.opts.CAFile)
		if err != nil {
			problems = append(problems, fmt.Errorf("tls: caFile: %w", err))
		} else if pool = x509.NewCertPool(); !pool.AppendCertsFromPEM(pem) {
			problems = append(problems, fmt.Errorf("tls: caFile %s holds no PEM certificate", g.opts.CAFile))
		}
	}
	if len(problems) > 0 {
		return nil, errors.Join(problems...)
	}
	st := &tlsState{cert: &cert, clientCAs: pool}
	st.server = &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{cert}}
	if pool != nil {
		// The ports also accept their own certificate as a client's, so
		// the broker can register with its embedded name server whatever
		// authority signed it; its key is the broker's identity anyway.
		clients := pool.Clone()
		if leaf, err := x509.ParseCertificate(cert.Certificate[0]); err == nil {
			clients.AddCert(leaf)
		}
		st.server.ClientAuth = tls.RequireAndVerifyClientCert
		st.server.ClientCAs = clients
	}
	return st, nil
}

// reload loads the files again; on failure the loaded ones stay.
func (g *tlsGate) reload() error {
	g.reloadMu.Lock()
	defer g.reloadMu.Unlock()
	st, err := g.load()
	if err != nil {
		return err
	}
	g.cur.Store(st)
	return nil
}

// serverConfig is the ports' TLS config: each handshake takes the current
// certificate and CA pool.
func (g *tlsGate) serverConfig() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			return g.cur.Load().server, nil
		},
	}
}

// clientConfig is the TLS config the broker dials name servers with. It
// presents the current certificate when asked for one, and accepts a name
// server whose certificate is the broker's own (the embedded name server,
// or a fleet sharing one certificate) or verifies against CAFile, else the
// system roots. The host name is checked when the name server is dialled
// by name; an IP address has no name to check, so only the chain is.
func (g *tlsGate) clientConfig() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		// Verified by VerifyConnection, which sees the current state.
		InsecureSkipVerify: true,
		VerifyConnection:   g.verifyNameServer,
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			return g.cur.Load().cert, nil
		},
	}
}

func (g *tlsGate) verifyNameServer(cs tls.ConnectionState) error {
	if len(cs.PeerCertificates) == 0 {
		return errors.New("tls: name server presented no certificate")
	}
	st := g.cur.Load()
	leaf := cs.PeerCertificates[0]
	if len(st.cert.Certificate) > 0 && bytes.Equal(leaf.Raw, st.cert.Certificate[0]) {
		return nil
	}
	opts := x509.VerifyOptions{Roots: st.clientCAs, DNSName: cs.ServerName, Intermediates: x509.NewCertPool()}
	for _, c := range cs.PeerCertificates[1:] {
		opts.Intermediates.AddCert(c)
	}
	_, err := leaf.Verify(opts)
	return err
}

// TLSMode is the TLS mode in force: TLSDisabled, TLSPermissive or
// TLSEnforcing.
func (s *Server) TLSMode() string { return s.cfg.TLS.Mode }

// ReloadTLS reads the certificate, key and CA files again and uses them
// for new handshakes; files that fail to load leave the current ones in
// force. SIGHUP and the plugins.reload admin command call it. With TLS
// disabled it does nothing.
func (s *Server) ReloadTLS() error {
	if s.tls == nil {
		return nil
	}
	if err := s.tls.reload(); err != nil {
		s.log.Error("tls reload refused; the previous certificates stay in force", "err", err)
		return err
	}
	s.log.Info("tls reloaded", "cert", s.tls.opts.CertFile, "mode", s.tls.opts.Mode)
	return nil
}
