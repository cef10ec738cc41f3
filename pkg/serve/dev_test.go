package serve

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

func TestDevSourceIsKeptAndPrivate(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "state", "evfwd")
	first, err := DevSource(dir)
	if err != nil {
		t.Fatal(err)
	}
	if first.Name != DevSourceName || !strings.HasPrefix(first.WriteKey, "wk_dev_") || first.Webhooks.SharedSecret == "" {
		t.Fatalf("dev source = %+v", first)
	}
	if first.Webhooks.Enabled {
		t.Error("webhooks enabled without an endpoint")
	}
	fi, err := os.Stat(DevSourcePath(dir))
	if err != nil {
		t.Fatal(err)
	}
	if perm := fi.Mode().Perm(); perm != 0o600 {
		t.Errorf("mode %v, want 0600", perm)
	}
	again, err := DevSource(dir)
	if err != nil {
		t.Fatal(err)
	}
	if again.WriteKey != first.WriteKey || again.Webhooks.SharedSecret != first.Webhooks.SharedSecret {
		t.Errorf("second run got other keys: %+v, then %+v", first, again)
	}
	cfg := Config{Sources: []Source{again}}
	if err := cfg.Validate(); err != nil {
		t.Errorf("dev source does not validate: %v", err)
	}
}

func TestDevSourceConcurrentStartsAgree(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	var wg sync.WaitGroup
	keys := make([]string, 8)
	for i := range keys {
		wg.Go(func() {
			src, err := DevSource(dir)
			if err != nil {
				t.Error(err)
			}
			keys[i] = src.WriteKey
		})
	}
	wg.Wait()
	for _, k := range keys {
		if k != keys[0] {
			t.Fatalf("starts disagree: %q", keys)
		}
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("left behind: %v", entries)
	}
}

func TestDevSourceRefusesABrokenFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	os.WriteFile(DevSourcePath(dir), []byte("{"), 0o600)
	if _, err := DevSource(dir); err == nil || !strings.Contains(err.Error(), "remove it") {
		t.Errorf("err = %v", err)
	}
}
