package inspector_test

import (
	"io"
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
	for _, path := range []string{"/", "/assets/app.js", "/assets/app.css"} {
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
