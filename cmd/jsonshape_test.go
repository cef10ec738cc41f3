package cmd

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
)

// jsonShape describes the NDJSON in out by its keys and value kinds, one
// line per key path ("latencyMs number"), each distinct record shape once
// in order of first appearance. Values (times, ports, latencies) vary from
// run to run; the names and kinds are what scripts depend on, so they are
// what the goldens pin. Keys under dataKeys hold user data or headers,
// not evfwd's names, and are not walked.
func jsonShape(t *testing.T, out string) string {
	t.Helper()
	var shapes []string
	for line := range strings.Lines(out) {
		var v any
		d := json.NewDecoder(strings.NewReader(line))
		d.UseNumber()
		if err := d.Decode(&v); err != nil {
			t.Fatalf("not JSON: %q: %v", line, err)
		}
		var b strings.Builder
		describe(&b, "", v, []byte(line))
		if s := b.String(); !slices.Contains(shapes, s) {
			shapes = append(shapes, s)
		}
	}
	return strings.Join(shapes, "---\n")
}

var dataKeys = map[string]bool{"body": true, "message": true, "headers": true}

// describe writes path and v's kind, then v's members for an object (in
// the order raw has them) or its first element for an array.
func describe(b *strings.Builder, path string, v any, raw []byte) {
	switch v := v.(type) {
	case map[string]any:
		if path != "" {
			fmt.Fprintf(b, "%s object\n", path)
		}
		last := path[strings.LastIndexByte(path, '.')+1:]
		if dataKeys[last] {
			return
		}
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		// encoding/json's map loses the order; the bytes keep it.
		slices.SortFunc(keys, func(a, c string) int {
			return bytes.Index(raw, []byte(`"`+a+`":`)) - bytes.Index(raw, []byte(`"`+c+`":`))
		})
		for _, k := range keys {
			describe(b, strings.TrimPrefix(path+"."+k, "."), v[k], raw)
		}
	case []any:
		fmt.Fprintf(b, "%s array\n", path)
		if len(v) > 0 {
			describe(b, path+"[]", v[0], raw)
		}
	case string:
		fmt.Fprintf(b, "%s string\n", path)
	case json.Number:
		fmt.Fprintf(b, "%s number\n", path)
	case bool:
		fmt.Fprintf(b, "%s bool\n", path)
	case nil:
		fmt.Fprintf(b, "%s null\n", path)
	}
}

// TestJSONShapes pins the keys of -o json output that has no exact golden
// of its own (run-dependent values): trigger's attempt, summary and load
// records, send's summary, demo's records, the admin commands' answers, version.
func TestJSONShapes(t *testing.T) {
	t.Run("trigger", func(t *testing.T) {
		e := newEndpoint(t, 503, 200)
		r := execute(t, testFactory(t, "", false, nil), "trigger", "track", "--url", e.URL, "--retry-initial", "1ms", "--secret", "k", "-o", "json")
		if r.Code != 0 {
			t.Fatalf("%+v", r)
		}
		golden(t, "trigger/once.shape", jsonShape(t, r.Stdout))
	})
	t.Run("trigger load", func(t *testing.T) {
		e := newEndpoint(t, 200)
		r := execute(t, testFactory(t, "", false, nil), "trigger", "page", "--url", e.URL, "--count", "5", "--concurrency", "2", "-o", "json")
		if r.Code != 0 {
			t.Fatalf("%+v", r)
		}
		golden(t, "trigger/load.shape", jsonShape(t, r.Stdout))
	})
	t.Run("admin", func(t *testing.T) {
		url, _ := startAdminServe(t)
		env := map[string]string{"EVFWD_ENDPOINT": url, "EVFWD_ADMIN_TOKEN": testAdminToken}
		for _, tt := range []struct {
			name, stdin string
			args        []string
		}{
			{"delete", "", []string{"delete", "--user-id", "u_42"}},
			{"audience-sync", "u1\nu2\n", []string{"audience", "sync", "VIP", "-"}},
			{"trait-sync", `{"userId":"u1","value":3}` + "\n", []string{"trait", "sync", "LTV", "-"}},
		} {
			r := execute(t, testFactory(t, tt.stdin, false, env), append(tt.args, "-o", "json")...)
			if r.Code != 0 {
				t.Fatalf("%s: %+v", tt.name, r)
			}
			golden(t, "admin/"+tt.name+".shape", jsonShape(t, r.Stdout))
		}
	})
	t.Run("send", func(t *testing.T) {
		r := execute(t, clientFactory(t, "", newCollectServer(t, nil)), "send", "../testdata/events.ndjson", "-o", "json")
		if r.Code != 0 {
			t.Fatalf("%+v", r)
		}
		golden(t, "send/json.shape", jsonShape(t, r.Stdout))
	})
	t.Run("demo", func(t *testing.T) {
		r := execute(t, testFactory(t, "", false, nil), "demo", "--timeout", "20s", "-o", "json")
		if r.Code != 0 || r.Stderr != "" {
			t.Fatalf("%+v", r)
		}
		// Webhooks arrive in any order and only some carry an event: the
		// shape pins the track one's, so the golden is the same every run.
		var keep strings.Builder
		webhooks := 0
		for line := range strings.Lines(r.Stdout) {
			if strings.HasPrefix(line, `{"record":"webhook",`) {
				webhooks++
				if !strings.Contains(line, `"type":"track"`) {
					continue
				}
			}
			keep.WriteString(line)
		}
		if webhooks != 6 {
			t.Errorf("%d webhook records, want 6:\n%s", webhooks, r.Stdout)
		}
		golden(t, "demo/json.shape", jsonShape(t, keep.String()))
	})
	t.Run("version", func(t *testing.T) {
		r := execute(t, testFactory(t, "", false, nil), "version", "-o", "json")
		if r.Code != 0 {
			t.Fatalf("%+v", r)
		}
		golden(t, "version/json.shape", jsonShape(t, r.Stdout))
	})
}
