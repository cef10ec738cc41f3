package receiver

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestServerLimits(t *testing.T) {
	tests := []struct {
		name        string
		opts        Options
		readTimeout time.Duration
		want        [4]time.Duration // read header, read, write, idle
	}{
		{"defaults", Options{}, 0, [4]time.Duration{10 * time.Second, 30 * time.Second, 40 * time.Second, 2 * time.Minute}},
		{"short read timeout", Options{}, time.Second, [4]time.Duration{time.Second, time.Second, 11 * time.Second, 2 * time.Minute}},
		{"delay and forward", Options{Simulate: Simulation{Delay: 6 * time.Second}, ForwardTo: "http://127.0.0.1:1/"}, 0,
			[4]time.Duration{10 * time.Second, 30 * time.Second, 76 * time.Second, 2 * time.Minute}},
	}
	for _, tt := range tests {
		h, err := New(tt.opts)
		if err != nil {
			t.Fatal(err)
		}
		s := h.Server(tt.readTimeout)
		got := [4]time.Duration{s.ReadHeaderTimeout, s.ReadTimeout, s.WriteTimeout, s.IdleTimeout}
		if diff := cmp.Diff(tt.want, got); diff != "" || s.Handler != h || s.MaxHeaderBytes != 64<<10 {
			t.Errorf("%s mismatch (-want +got):\n%s", tt.name, diff)
		}
	}
}

func TestEndTornLine(t *testing.T) {
	tests := []struct{ name, before, after string }{
		{"empty", "", ""},
		{"whole lines", "{}\n{}\n", "{}\n{}\n"},
		{"torn", "{}\n{\"meth", "{}\n{\"meth\n"},
	}
	for _, tt := range tests {
		path := filepath.Join(t.TempDir(), "hooks.ndjson")
		if err := os.WriteFile(path, []byte(tt.before), 0o600); err != nil {
			t.Fatal(err)
		}
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			t.Fatal(err)
		}
		if err := EndTornLine(f); err != nil {
			t.Errorf("%s: %v", tt.name, err)
		}
		f.Close()
		b, _ := os.ReadFile(path)
		if diff := cmp.Diff(tt.after, string(b)); diff != "" {
			t.Errorf("%s mismatch (-want +got):\n%s", tt.name, diff)
		}
	}
}
