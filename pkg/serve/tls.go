package serve

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/evfwd/evfwd/internal/tlscert"
)

// With Config.TLSCert and TLSKey set, the service speaks HTTPS only: TLS
// 1.2 or later, HTTP/2 or HTTP/1.1 by ALPN. Segment's Ruby client
// (analytics-ruby 2.x) has no plain-HTTP mode, so it needs this to reach
// serve unchanged. ReloadTLS reads the pair again (`evfwd serve` does on
// SIGHUP): new connections get the new certificate, open ones keep going.

// ErrTLSOff is ReloadTLS's answer when the service speaks plain HTTP.
var ErrTLSOff = errors.New("TLS is off (no tls_cert and tls_key)")

// loadTLS loads the pair c names, nil when TLS is off.
func (c *Config) loadTLS() (*tlscert.Reloader, error) {
	switch {
	case c.TLSCert == "" && c.TLSKey == "":
		return nil, nil
	case c.TLSKey == "":
		return nil, errors.New("tls_cert is set without tls_key: give both or neither")
	case c.TLSCert == "":
		return nil, errors.New("tls_key is set without tls_cert: give both or neither")
	}
	r, err := tlscert.NewReloader(c.TLSCert, c.TLSKey)
	if err != nil {
		return nil, fmt.Errorf("tls: %w", err)
	}
	return r, nil
}

// useTLS loads the pair and logs what it holds; the listener is wrapped
// by listenTLS.
func (s *Server) useTLS() error {
	r, err := s.cfg.loadTLS()
	if err != nil || r == nil {
		return err
	}
	s.tls = r
	s.logCert("tls certificate", r.Certificate().Leaf)
	return nil
}

// listenTLS wraps ln when TLS is on.
func (s *Server) listenTLS(ln net.Listener) net.Listener {
	if s.tls == nil {
		return ln
	}
	return tls.NewListener(ln, s.tls.ServerConfig())
}

// ReloadTLS reads Config.TLSCert and TLSKey again. On success the next
// handshake presents the new certificate; connections already open keep
// theirs. When the files do not hold a good pair, the certificate in use
// stays and the error (also logged) says why.
func (s *Server) ReloadTLS() error {
	if s.tls == nil {
		return ErrTLSOff
	}
	cert, err := s.tls.Reload()
	if err != nil {
		s.log.Error("tls certificate reload failed; keeping the one in use", append([]any{"err", err}, certAttrs(s.tls.Certificate().Leaf)...)...)
		return err
	}
	s.logCert("tls certificate reloaded", cert.Leaf)
	return nil
}

func (s *Server) logCert(msg string, leaf *x509.Certificate) {
	s.log.Info(msg, certAttrs(leaf)...)
	if now := time.Now(); now.After(leaf.NotAfter) {
		s.log.Warn("tls certificate has expired: clients will refuse it", "not_after", leaf.NotAfter.UTC())
	} else if now.Before(leaf.NotBefore) {
		s.log.Warn("tls certificate is not valid yet: clients will refuse it", "not_before", leaf.NotBefore.UTC())
	}
}

// certAttrs are what a log line says of a certificate: the serial as
// `openssl x509 -serial` prints it.
func certAttrs(leaf *x509.Certificate) []any {
	return []any{"subject", leaf.Subject.String(), "serial", fmt.Sprintf("%X", leaf.SerialNumber), "not_after", leaf.NotAfter.UTC()}
}
