package server

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"math/big"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// The self-signed certificate of TLS without certFile and keyFile, so that
// a client that turned TLS on reaches a broker that was given no
// certificate, as with RocketMQ. It is generated once and kept, so its
// fingerprint, logged at every start, stays what a client may pin:
//
//	<dataDir>/tls/          0700
//	  selfsigned.crt        PEM certificate, ECDSA P-256, valid 10 years
//	  selfsigned.key        PEM PKCS#8 private key, 0600
//
// The certificate names localhost, 127.0.0.1, ::1, the machine's host name
// and the hosts of the listen and advertised addresses; it is a server
// and a client certificate (the broker presents it to name servers that
// ask for one).

const (
	selfSignedDir      = "tls"
	selfSignedCertName = "selfsigned.crt"
	selfSignedKeyName  = "selfsigned.key"
	selfSignedValidity = 10 * 365 * 24 * time.Hour
)

// selfSigned returns the files of the kept self-signed certificate in
// dataDir, generating them if there are none; with dataDir empty, a
// certificate generated in memory. It logs the certificate's SHA-256
// fingerprint.
func selfSigned(dataDir string, hosts []string, log *slog.Logger) (certFile, keyFile string, mem *tls.Certificate, err error) {
	if dataDir == "" {
		certPEM, keyPEM, err := generateSelfSigned(hosts, time.Now())
		if err != nil {
			return "", "", nil, err
		}
		cert, err := tls.X509KeyPair(certPEM, keyPEM)
		if err != nil {
			return "", "", nil, fmt.Errorf("tls: the generated certificate: %w", err)
		}
		log.Info("tls: no certFile: generated a self-signed certificate for this run (no dataDir to keep it in)",
			"sha256", fingerprint(cert.Certificate[0]))
		return "", "", &cert, nil
	}
	dir := filepath.Join(dataDir, selfSignedDir)
	certFile, keyFile = filepath.Join(dir, selfSignedCertName), filepath.Join(dir, selfSignedKeyName)
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	switch {
	case err == nil:
		leaf, perr := x509.ParseCertificate(cert.Certificate[0])
		if perr == nil && time.Now().Before(leaf.NotAfter) {
			log.Info("tls: no certFile: using the self-signed certificate kept in the data directory",
				"cert", certFile, "sha256", fingerprint(cert.Certificate[0]))
			return certFile, keyFile, nil, nil
		}
		log.Warn("tls: the kept self-signed certificate has expired; generating a new one", "cert", certFile)
	case !errors.Is(err, fs.ErrNotExist):
		return "", "", nil, fmt.Errorf("tls: the kept self-signed certificate %s: %w (remove %s to generate a new one)", certFile, err, dir)
	}
	certPEM, keyPEM, err := generateSelfSigned(hosts, time.Now())
	if err != nil {
		return "", "", nil, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", "", nil, fmt.Errorf("tls: %w", err)
	}
	// The key first: a certificate on file always has its key.
	if err := writeFileAtomic(keyFile, keyPEM, 0o600); err != nil {
		return "", "", nil, err
	}
	if err := writeFileAtomic(certFile, certPEM, 0o644); err != nil {
		return "", "", nil, err
	}
	block, _ := pem.Decode(certPEM)
	log.Info("tls: no certFile: generated a self-signed certificate and kept it in the data directory",
		"cert", certFile, "sha256", fingerprint(block.Bytes))
	return certFile, keyFile, nil, nil
}

// generateSelfSigned makes a self-signed ECDSA P-256 certificate for
// hosts (and the local names), valid from an hour before now for
// selfSignedValidity, and returns it and its key in PEM.
func generateSelfSigned(hosts []string, now time.Time) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("tls: generate a key: %w", err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, nil, fmt.Errorf("tls: generate a serial number: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: "rmq broker (self-signed)"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(selfSignedValidity),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		BasicConstraintsValid: true,
		IsCA:                  true, // so a client can trust it as its own root
	}
	names := append([]string{"localhost", "127.0.0.1", "::1"}, hosts...)
	if h, err := os.Hostname(); err == nil {
		names = append(names, h)
	}
	for _, n := range names {
		if ip, err := netip.ParseAddr(n); err == nil {
			if ip = ip.Unmap(); !ip.IsUnspecified() && !slices.ContainsFunc(tmpl.IPAddresses, func(x net.IP) bool { return x.Equal(ip.AsSlice()) }) {
				tmpl.IPAddresses = append(tmpl.IPAddresses, ip.AsSlice())
			}
		} else if n != "" && !slices.Contains(tmpl.DNSNames, n) {
			tmpl.DNSNames = append(tmpl.DNSNames, n)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, fmt.Errorf("tls: create the certificate: %w", err)
	}
	pkcs8, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, nil, fmt.Errorf("tls: encode the key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: pkcs8}), nil
}

// fingerprint is the SHA-256 of a DER certificate as colon-separated hex,
// as openssl x509 -fingerprint -sha256 prints it.
func fingerprint(der []byte) string {
	sum := sha256.Sum256(der)
	var b strings.Builder
	for i, c := range sum {
		if i > 0 {
			b.WriteByte(':')
		}
		fmt.Fprintf(&b, "%02X", c)
	}
	return b.String()
}

// writeFileAtomic writes data to path through a temporary file in the same
// directory, synced and renamed, so a crash leaves the old file or the new
// one whole.
func writeFileAtomic(path string, data []byte, perm os.FileMode) error {
	f, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".*.tmp")
	if err != nil {
		return fmt.Errorf("tls: %w", err)
	}
	tmp := f.Name()
	err = f.Chmod(perm)
	if err == nil {
		_, err = f.Write(data)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("tls: write %s: %w", path, err)
	}
	return nil
}

// tlsHosts are the hosts of cfg's listen and advertised addresses, for
// the self-signed certificate.
func (c *Config) tlsHosts() []string {
	var hosts []string
	for _, a := range []string{c.Listen, c.Advertise, c.NamesrvListen, c.GRPCListen, c.GRPC.Advertise} {
		if h, _, err := net.SplitHostPort(a); err == nil && h != "" {
			hosts = append(hosts, h)
		} else if err != nil && a != "" && !strings.Contains(a, ":") {
			hosts = append(hosts, a) // an advertised host without a port
		}
	}
	return hosts
}
