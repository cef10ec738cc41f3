// Package tlscert serves TLS from a certificate file and a key file that
// can be read again while the server runs: `evfwd serve` and `evfwd listen`
// both take --tls-cert and --tls-key. A pair is loaded and checked as a
// whole, and each handshake takes whichever pair was loaded last, so a
// renewed certificate reaches new connections without closing open ones.
package tlscert

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
)

// MinVersion is the oldest TLS version evfwd's servers speak.
const MinVersion = tls.VersionTLS12

// Load reads a PEM certificate (its chain may follow it) and the PEM
// private key that belongs to it. An error names the file at fault.
func Load(certFile, keyFile string) (*tls.Certificate, error) {
	certPEM, err := os.ReadFile(certFile)
	if err != nil {
		return nil, fmt.Errorf("certificate: %w", err)
	}
	keyPEM, err := os.ReadFile(keyFile)
	if err != nil {
		return nil, fmt.Errorf("key: %w", err)
	}
	// The certificate on its own first, so that what remains of
	// tls.X509KeyPair's complaints are about the key.
	der := leafDER(certPEM)
	if der == nil {
		return nil, fmt.Errorf("certificate %s: no PEM CERTIFICATE block", certFile)
	}
	if _, err := x509.ParseCertificate(der); err != nil {
		return nil, fmt.Errorf("certificate %s: %v", certFile, err)
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("key %s (for certificate %s): %s", keyFile, certFile, strings.TrimPrefix(err.Error(), "tls: "))
	}
	if cert.Leaf == nil { // GODEBUG=x509keypairleaf=0
		if cert.Leaf, err = x509.ParseCertificate(cert.Certificate[0]); err != nil {
			return nil, fmt.Errorf("certificate %s: %v", certFile, err)
		}
	}
	return &cert, nil
}

// Leaf is the DER of the first certificate in the PEM file certFile (the
// leaf, when a chain follows it).
func Leaf(certFile string) ([]byte, error) {
	b, err := os.ReadFile(certFile)
	if err != nil {
		return nil, err
	}
	if der := leafDER(b); der != nil {
		return der, nil
	}
	return nil, fmt.Errorf("%s: no PEM CERTIFICATE block", certFile)
}

// leafDER is the DER of the first CERTIFICATE block of PEM text, nil
// when it holds none.
func leafDER(text []byte) []byte {
	for {
		block, rest := pem.Decode(text)
		if block == nil {
			return nil
		}
		if block.Type == "CERTIFICATE" {
			return block.Bytes
		}
		text = rest
	}
}

// Reloader holds the pair last loaded from two files.
type Reloader struct {
	certFile, keyFile string
	mu                sync.Mutex // one Reload at a time, so the last to read the files wins
	cert              atomic.Pointer[tls.Certificate]
}

// NewReloader loads the pair once; an error is Load's.
func NewReloader(certFile, keyFile string) (*Reloader, error) {
	if certFile == "" || keyFile == "" {
		return nil, errors.New("a certificate file and a key file go together")
	}
	cert, err := Load(certFile, keyFile)
	if err != nil {
		return nil, err
	}
	r := &Reloader{certFile: certFile, keyFile: keyFile}
	r.cert.Store(cert)
	return r, nil
}

// Reload reads the files again and serves the new pair from the next
// handshake on. When they do not hold a good pair (unreadable, not PEM, a
// key that belongs to another certificate) the old pair stays and the
// error says why.
func (r *Reloader) Reload() (*tls.Certificate, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	cert, err := Load(r.certFile, r.keyFile)
	if err != nil {
		return nil, err
	}
	r.cert.Store(cert)
	return cert, nil
}

// Certificate is the pair handshakes use now; its Leaf is set.
func (r *Reloader) Certificate() *tls.Certificate { return r.cert.Load() }

// GetCertificate is for tls.Config.GetCertificate.
func (r *Reloader) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	return r.cert.Load(), nil
}

// ServerConfig is a server's TLS settings: TLS 1.2 or later, HTTP/2 or
// HTTP/1.1 by ALPN, and the pair loaded last.
func (r *Reloader) ServerConfig() *tls.Config {
	return &tls.Config{
		MinVersion:     MinVersion,
		NextProtos:     []string{"h2", "http/1.1"},
		GetCertificate: r.GetCertificate,
	}
}
