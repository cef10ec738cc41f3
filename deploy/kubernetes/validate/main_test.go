package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestValidate: the manifests pass, and each promise they keep fails
// when it is broken.
func TestValidate(t *testing.T) {
	docs := map[string][]byte{}
	files, _ := filepath.Glob("../*.yaml")
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		docs[filepath.Base(f)] = b
	}
	if _, _, err := validate(docs); err != nil {
		t.Fatalf("the manifests: %v", err)
	}
	for _, tt := range []struct {
		file, old, new, want string
	}{
		{"deployment.yaml", "replicas: 3", "replicas: 2", "replicas: 3"},
		{"deployment.yaml", "terminationGracePeriodSeconds: 30", "terminationGracePerodSeconds: 30", `unknown field "terminationGracePerodSeconds"`},
		{"deployment.yaml", "cpu: 250m", "cpu: lots", "quantities must match"},
		{"deployment.yaml", "path: /livez", "path: /healthz", "liveness probe GET /livez"},
		{"deployment.yaml", "path: /readyz", "path: /ready", "readiness probe GET /readyz"},
		{"deployment.yaml", "terminationGracePeriodSeconds: 30", "terminationGracePeriodSeconds: 15", "at least 21s"},
		{"deployment.yaml", "--grace, 15s", "--grace, 30s", "at least 36s"},
		{"deployment.yaml", "key: admin-token", "key: admin_token", `reads key "admin_token"`},
		{"deployment.yaml", "memory: 256Mi", "memory: 32Mi", "memory limit"},
		{"deployment.yaml", "port: http", "port: web", "probe GET"},
		{"service.yaml", "targetPort: http", "targetPort: 8080", "targetPort 8080"},
		{"secret.yaml", "  admin-token:", "  admin-tokens:", `reads key "admin-token"`},
		{"poddisruptionbudget.yaml", "minAvailable: 2", "minAvailable: 3", "minAvailable"},
	} {
		broken := map[string][]byte{}
		for k, v := range docs {
			broken[k] = v
		}
		if !strings.Contains(string(docs[tt.file]), tt.old) {
			t.Fatalf("%s holds no %q", tt.file, tt.old)
		}
		broken[tt.file] = []byte(strings.Replace(string(docs[tt.file]), tt.old, tt.new, 1))
		if _, _, err := validate(broken); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s with %q: %v, want an error saying %q", tt.file, tt.new, err, tt.want)
		}
	}
}
