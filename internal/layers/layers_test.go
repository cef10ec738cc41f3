package layers

import (
	"bufio"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/evfwd/evfwd"

// root is the module's directory, two levels up from this package.
var root = filepath.Join("..", "..")

func TestEveryPackageHasARow(t *testing.T) {
	layer := table(t)
	for _, pkg := range packages(t) {
		if _, ok := layer[pkg]; !ok {
			t.Errorf("%s is not in docs/ARCHITECTURE.md's layer table", pkg)
		}
	}
	have := map[string]bool{}
	for _, pkg := range packages(t) {
		have[pkg] = true
	}
	for pkg := range layer {
		if !have[pkg] {
			t.Errorf("docs/ARCHITECTURE.md names %s, which is not a package", pkg)
		}
	}
}

func TestNoImportUpTheLayers(t *testing.T) {
	layer := table(t)
	for _, pkg := range packages(t) {
		for _, imp := range imports(t, pkg) {
			from, ok1 := layer[pkg]
			to, ok2 := layer[imp]
			if ok1 && ok2 && to < from {
				t.Errorf("%s (layer %d) imports %s (layer %d), a layer above it", pkg, from, imp, to)
			}
		}
	}
}

// table reads the layer table: each package named in backquotes in a row's
// second column, with its layer's position (0 at the top). A row whose
// first column is empty is in the layer above it.
func table(t *testing.T) map[string]int {
	t.Helper()
	f, err := os.Open(filepath.Join(root, "docs", "ARCHITECTURE.md"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	names := regexp.MustCompile("`([^`]+)`")
	layer := map[string]int{}
	n, in := -1, false
	for sc := bufio.NewScanner(f); sc.Scan(); {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "| layer |"):
			in = true
			continue
		case !in:
			continue
		case !strings.HasPrefix(line, "|"):
			if len(layer) == 0 {
				t.Fatal("docs/ARCHITECTURE.md: no rows in the layer table")
			}
			return layer
		case strings.HasPrefix(line, "|---"):
			continue
		}
		cols := strings.Split(line, "|")
		if len(cols) < 4 {
			t.Fatalf("docs/ARCHITECTURE.md: row %q has too few columns", line)
		}
		if strings.TrimSpace(cols[1]) != "" {
			n++
		}
		for _, m := range names.FindAllStringSubmatch(cols[2], -1) {
			layer[m[1]] = n
		}
	}
	t.Fatal("docs/ARCHITECTURE.md: no layer table")
	return nil
}

// packages lists the module's packages by directory (relative, slashed),
// those with non-test Go files. bench/ measures the product from outside
// and the root holds only main, so neither is in the table.
func packages(t *testing.T) []string {
	t.Helper()
	var pkgs []string
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "bench" || name == "node_modules") {
				return filepath.SkipDir
			}
			if _, err := os.Stat(filepath.Join(path, "go.mod")); path != root && err == nil {
				return filepath.SkipDir // a module of its own (deploy/kubernetes/validate)
			}
			return nil
		}
		if dir := filepath.Dir(path); dir != root && strings.HasSuffix(name, ".go") && !strings.HasSuffix(name, "_test.go") {
			rel, err := filepath.Rel(root, dir)
			if err != nil {
				return err
			}
			if rel = filepath.ToSlash(rel); len(pkgs) == 0 || pkgs[len(pkgs)-1] != rel {
				pkgs = append(pkgs, rel)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return pkgs
}

// imports lists the module's packages that pkg's non-test files import.
func imports(t *testing.T, pkg string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(root, filepath.FromSlash(pkg), "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	var out []string
	for _, file := range files {
		if strings.HasSuffix(file, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), file, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, spec := range f.Imports {
			path, _ := strconv.Unquote(spec.Path.Value)
			if rel, ok := strings.CutPrefix(path, module+"/"); ok && !seen[rel] {
				seen[rel] = true
				out = append(out, rel)
			}
		}
	}
	return out
}
