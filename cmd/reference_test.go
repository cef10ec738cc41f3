package cmd

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestReference holds docs/reference to the command tree: the committed
// pages must be exactly what `evfwd man --markdown` writes, so that a flag
// added, renamed or reworded without regenerating them fails here.
// Regenerate with: go test ./cmd -run '^TestReference$' -update
func TestReference(t *testing.T) {
	t.Parallel()
	gen := t.TempDir()
	if r := execute(t, testFactory(t, "", false, nil), "man", "--markdown", "--dir", gen); r.Code != 0 {
		t.Fatalf("evfwd man --markdown: exit %d\n%s", r.Code, r.Stderr)
	}
	committed := filepath.Join("..", referenceDir)
	if *update {
		if err := os.RemoveAll(committed); err != nil {
			t.Fatal(err)
		}
		if err := os.CopyFS(committed, os.DirFS(gen)); err != nil {
			t.Fatal(err)
		}
	}
	want, got := readPages(t, committed), readPages(t, gen)
	for name, page := range got {
		switch old, ok := want[name]; {
		case !ok:
			t.Errorf("%s/%s is missing", referenceDir, name)
		case old != page:
			t.Errorf("%s/%s differs from what the commands generate", referenceDir, name)
		}
	}
	for name := range want {
		if _, ok := got[name]; !ok {
			t.Errorf("%s/%s is for a command that no longer exists", referenceDir, name)
		}
	}
	if t.Failed() {
		t.Log("regenerate with: go test ./cmd -run '^TestReference$' -update")
	}
}

// readPages returns the Markdown files in dir by name.
func readPages(t *testing.T, dir string) map[string]string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	pages := map[string]string{}
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".md") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		pages[e.Name()] = string(b)
	}
	return pages
}

// TestManMarkdownNeedsDir: --markdown writes a tree of pages, so it needs
// a folder (exit 2 naming the flag), not stdout.
func TestManMarkdownNeedsDir(t *testing.T) {
	t.Parallel()
	r := execute(t, testFactory(t, "", false, nil), "man", "--markdown")
	if r.Code != 2 || !strings.Contains(r.Stderr, "--dir") {
		t.Errorf("exit %d, stderr %q; want 2 naming --dir", r.Code, r.Stderr)
	}
}
