package inspector_test

import (
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/evfwd/evfwd/pkg/inspector"
)

// MaxPageBytes is the bound on the page's weight: every file the
// browser loads.
const MaxPageBytes = 150 << 10

func TestPageWeight(t *testing.T) {
	files, err := filepath.Glob("ui/*")
	if err != nil {
		t.Fatal(err)
	}
	total := 0
	for _, f := range files {
		fi, err := os.Stat(f)
		if err != nil {
			t.Fatal(err)
		}
		total += int(fi.Size())
	}
	t.Logf("page weight: %d bytes in %d files", total, len(files))
	if total > MaxPageBytes {
		t.Errorf("the page weighs %d bytes, over %d", total, MaxPageBytes)
	}
}

// TestPageLoadsOnlyItself checks that the page names nothing on another
// host, and that the CSP header keeps it so.
func TestPageLoadsOnlyItself(t *testing.T) {
	srv := httptest.NewServer(inspector.Assets())
	defer srv.Close()
	remote := regexp.MustCompile(`(?i)(src|href)\s*=\s*["']?(https?:)?//`)
	paths := []string{"/"}
	for _, f := range append(pageFiles(t, "*.js"), pageFiles(t, "*.css")...) {
		paths = append(paths, "/assets/"+f)
	}
	for _, path := range paths {
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Errorf("%s: %d", path, resp.StatusCode)
			continue
		}
		if m := remote.Find(body); m != nil {
			t.Errorf("%s loads from another host: %s", path, m)
		}
		if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'self'") {
			t.Errorf("%s: CSP %q", path, csp)
		}
	}
}

// pageFiles names the files of ui/ that match pattern.
func pageFiles(t *testing.T, pattern string) []string {
	t.Helper()
	files, err := fs.Glob(os.DirFS("ui"), pattern)
	if err != nil || len(files) == 0 {
		t.Fatalf("ui/%s: %v %v", pattern, files, err)
	}
	return files
}

// moduleImport is an import of another module of the page, static or
// dynamic: always a path relative to the module, so that it stays on this
// origin.
var moduleImport = regexp.MustCompile(`(?m)(?:^import [^;]* from |\bimport\()'([^']+)'`)

// TestPageModules checks the page's ES modules as a browser would load
// them: index.html loads main.js as a module; every module is served as
// JavaScript (a browser refuses a module of another type), under the CSP
// that allows this origin's scripts; every import names a file of ui/;
// and every module is reached from main.js, none left behind.
func TestPageModules(t *testing.T) {
	srv := httptest.NewServer(inspector.Assets())
	defer srv.Close()
	get := func(path string) (string, http.Header) {
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 {
			t.Fatalf("%s: %d %s", path, resp.StatusCode, body)
		}
		return string(body), resp.Header
	}
	if index, _ := get("/"); !strings.Contains(index, `<script type="module" src="/assets/main.js"></script>`) {
		t.Errorf("index.html does not load main.js as a module:\n%s", index)
	}
	reached := map[string]bool{}
	queue := []string{"main.js"}
	for len(queue) > 0 {
		name := queue[0]
		queue = queue[1:]
		if reached[name] {
			continue
		}
		reached[name] = true
		body, h := get("/assets/" + name)
		if ct := h.Get("Content-Type"); ct != "text/javascript; charset=utf-8" {
			t.Errorf("%s: Content-Type %q, want text/javascript", name, ct)
		}
		if csp := h.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'self'") || strings.Contains(csp, "script-src") {
			t.Errorf("%s: CSP %q does not let this origin's scripts run", name, csp)
		}
		for _, m := range moduleImport.FindAllStringSubmatch(body, -1) {
			dep, ok := strings.CutPrefix(m[1], "./")
			if !ok || strings.Contains(dep, "/") {
				t.Errorf("%s imports %q: want ./NAME.js, a file of ui/", name, m[1])
				continue
			}
			if _, err := os.Stat(filepath.Join("ui", dep)); err != nil {
				t.Errorf("%s imports %q: %v", name, m[1], err)
				continue
			}
			queue = append(queue, dep)
		}
	}
	for _, f := range pageFiles(t, "*.js") {
		if !reached[f] {
			t.Errorf("ui/%s: no module imports it", f)
		}
	}
	t.Logf("%d modules", len(reached))
}
