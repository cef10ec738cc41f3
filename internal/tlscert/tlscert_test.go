package tlscert_test

import (
	"crypto/tls"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/evfwd/evfwd/internal/tlscert"
	"github.com/evfwd/evfwd/internal/tlscert/tlscerttest"
)

func TestOneFileHoldsKeyAndCertificate(t *testing.T) {
	p := tlscerttest.NewCA(t).Issue(t, 7)
	both := filepath.Join(t.TempDir(), "both.pem")
	if err := os.WriteFile(both, append(append([]byte{}, p.Key...), p.Cert...), 0o600); err != nil {
		t.Fatal(err)
	}
	r, err := tlscert.NewReloader(both, both)
	if err != nil {
		t.Fatal(err)
	}
	if got := r.Certificate().Leaf.SerialNumber.Int64(); got != 7 {
		t.Errorf("serial %d, want 7", got)
	}
	if cfg := r.ServerConfig(); cfg.MinVersion != tls.VersionTLS12 || cfg.NextProtos[0] != "h2" {
		t.Errorf("MinVersion %x, NextProtos %v", cfg.MinVersion, cfg.NextProtos)
	}
}

func TestReloadWhileHandshaking(t *testing.T) {
	ca := tlscerttest.NewCA(t)
	certFile, keyFile := ca.Files(t, 1)
	r, err := tlscert.NewReloader(certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	pairs := []tlscerttest.Pair{ca.Issue(t, 2), ca.Issue(t, 3)}
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := range 20 {
			p := pairs[i%2]
			if os.WriteFile(certFile, p.Cert, 0o644) != nil || os.WriteFile(keyFile, p.Key, 0o600) != nil {
				t.Error("cannot write the pair")
				return
			}
			r.Reload() // may read a half-written pair: then the old one stays
		}
	})
	for range 4 {
		wg.Go(func() {
			for range 200 {
				if c, _ := r.GetCertificate(nil); c == nil || c.Leaf == nil {
					t.Error("no certificate")
					return
				}
			}
		})
	}
	wg.Wait()
	pairs[0].Write(t, certFile, keyFile)
	if c, err := r.Reload(); err != nil || c.Leaf.SerialNumber.Int64() != 2 || r.Certificate() != c {
		t.Errorf("Reload: %v", err)
	}
}
