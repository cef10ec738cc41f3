package layers

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestFuzzList: docs/DEVELOPMENT.md's list of fuzz targets names each
// func FuzzX of the tree, with its package, and nothing else.
func TestFuzzList(t *testing.T) {
	listed := fuzzList(t)
	var found []string
	target := regexp.MustCompile(`(?m)^func (Fuzz\w*)\(\w+ \*testing\.F\)`)
	for _, pkg := range append(packages(t), ".") {
		files, err := filepath.Glob(filepath.Join(root, filepath.FromSlash(pkg), "*_test.go"))
		if err != nil {
			t.Fatal(err)
		}
		for _, file := range files {
			src, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range target.FindAllSubmatch(src, -1) {
				found = append(found, string(m[1])+" ("+pkg+")")
			}
		}
	}
	if len(found) == 0 {
		t.Fatal("no fuzz target found: is the walk looking in the right place?")
	}
	for _, f := range found {
		if !slices.Contains(listed, f) {
			t.Errorf("docs/DEVELOPMENT.md's fuzz list misses %s", f)
		}
	}
	for _, l := range listed {
		if !slices.Contains(found, l) {
			t.Errorf("docs/DEVELOPMENT.md lists %s, which is not a fuzz target", l)
		}
	}
}

// fuzzList reads the "Fuzz targets" item of docs/DEVELOPMENT.md: groups
// of `FuzzX` names, each followed by its package in parentheses, as
// "FuzzX (pkg)".
func fuzzList(t *testing.T) []string {
	t.Helper()
	doc, err := os.ReadFile(filepath.Join(root, "docs", "DEVELOPMENT.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, item, ok := strings.Cut(string(doc), "\n- Fuzz targets")
	if !ok {
		t.Fatal(`docs/DEVELOPMENT.md: no "- Fuzz targets" item`)
	}
	item, _, _ = strings.Cut(item, "\n- ")
	var listed []string
	group := regexp.MustCompile("((?:`Fuzz\\w*`[,\\s]*)+)\\(([^)]+)\\)")
	name := regexp.MustCompile("`(Fuzz\\w*)`")
	for _, g := range group.FindAllStringSubmatch(item, -1) {
		for _, n := range name.FindAllStringSubmatch(g[1], -1) {
			listed = append(listed, n[1]+" ("+g[2]+")")
		}
	}
	return listed
}
