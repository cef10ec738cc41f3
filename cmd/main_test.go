package cmd

import (
	"bytes"
	"context"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/evfwd/evfwd/internal/cli"
	"github.com/evfwd/evfwd/internal/testmain"
)

func TestMain(m *testing.M) { testmain.Run(m, closeBrowser) }

var update = flag.Bool("update", false, "rewrite golden files in testdata/")

// result is what one evfwd invocation printed and returned.
type result struct {
	Stdout, Stderr string
	Code           int
}

// execute runs evfwd with args on f (see testFactory) as main would.
func execute(t testing.TB, f *cli.Factory, args ...string) result {
	t.Helper()
	return executeCtx(t, context.Background(), f, args...)
}

func executeCtx(t testing.TB, ctx context.Context, f *cli.Factory, args ...string) result {
	t.Helper()
	code := run(ctx, f, args)
	return result{
		Stdout: f.IO.Out.(*bytes.Buffer).String(),
		Stderr: f.IO.ErrOut.(*bytes.Buffer).String(),
		Code:   code,
	}
}

// testFactory returns a factory on buffers with stdin, an environment of
// its own and no config file; tty sets every stream's TTY flag.
func testFactory(t testing.TB, stdin string, tty bool, env map[string]string) *cli.Factory {
	t.Helper()
	f, io := cli.TestFactory()
	io.In = bytes.NewBufferString(stdin)
	io.SetTTY(tty)
	f.Getenv = func(k string) string { return env[k] }
	return f
}

// golden compares got with testdata/name, rewriting it under -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if string(want) != got {
		t.Errorf("%s mismatch:\n--- want\n%s\n--- got\n%s", name, want, got)
	}
}

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
