package cli

import (
	"os"
	"path/filepath"
	"testing"
)

func TestSecretResolveOrder(t *testing.T) {
	cfgPath := filepath.Join(t.TempDir(), "config.yaml")
	os.WriteFile(cfgPath, []byte("listen:\n  secret: from-file\n"), 0o600)
	cfg, err := LoadConfig(cfgPath, true)
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{}
	getenv := func(k string) string { return env[k] }
	for _, tt := range []struct {
		name   string
		flag   string
		env    string
		lookup bool
		want   string
	}{
		{"flag first", "from-flag", "from-env", true, "from-flag"},
		{"env before the file", "", "from-env", true, "from-env"},
		{"the file", "", "", true, "from-file"},
		{"without Lookup only flags count", "", "from-env", false, ""},
	} {
		env[EnvPrefix+"SECRET"] = tt.env
		var s Secret
		if tt.flag != "" {
			s.Values = []string{tt.flag}
		}
		if tt.lookup {
			s.Lookup(getenv, cfg)
		}
		got, err := s.Resolve("listen", false)
		if err != nil || string(got) != tt.want {
			t.Errorf("%s: %q, %v; want %q", tt.name, got, err, tt.want)
		}
	}
}

func TestSecretRepeated(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "s")
	os.WriteFile(file, []byte("from-file\n"), 0o600)
	s := Secret{Values: []string{"a", "b"}, Files: []string{file}}
	all, err := s.ResolveAll("verify", true)
	if err != nil || len(all) != 3 || string(all[0]) != "a" || string(all[1]) != "b" || string(all[2]) != "from-file" {
		t.Fatalf("%q, %v", all, err)
	}
	if _, err := s.Resolve("sign", true); err == nil {
		t.Error("Resolve took three secrets")
	}
	if _, err := (&Secret{Values: []string{""}}).ResolveAll("verify", true); err == nil {
		t.Error("an empty --secret")
	}
}
