package cmd

import (
	"encoding/json"
	"path/filepath"
	"slices"
	"testing"
)

// TestServeInitSourceKind: the source serve init writes is not named after
// a kind it does not have (issue 41: "web" of kind server).
func TestServeInitSourceKind(t *testing.T) {
	path := filepath.Join(t.TempDir(), "evfwd.yaml")
	if res := execute(t, testFactory(t, "", false, nil), "serve", "init", "--config", path); res.Code != 0 {
		t.Fatalf("init: code %d, stderr %q", res.Code, res.Stderr)
	}
	res := execute(t, testFactory(t, "", false, nil), "serve", "--check", "--config", path, "-o", "json")
	var got struct{ Sources []struct{ Name, Kind string } }
	if err := json.Unmarshal([]byte(res.Stdout), &got); err != nil || len(got.Sources) != 1 {
		t.Fatalf("check: code %d, %v, stdout %q", res.Code, err, res.Stdout)
	}
	src := got.Sources[0]
	if src.Kind != "server" {
		t.Errorf("kind %q, want server, the dev source's, that send and track need", src.Kind)
	}
	if kinds := []string{"server", "web", "mobile"}; slices.Contains(kinds, src.Name) && src.Name != src.Kind {
		t.Errorf("the source is named %q but its kind is %q", src.Name, src.Kind)
	}
}
