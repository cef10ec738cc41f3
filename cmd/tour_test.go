package cmd

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestTour runs the README's tour blocks, as written, one line at a time
// against the real binary in a fresh home and a directory that stands for
// the clone: the newcomer's first hour. Every line must exit 0. Then it
// checks how the servers and a --count wait end on Ctrl-C.
func TestTour(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := buildEvfwd(t)
	home := t.TempDir()
	work := filepath.Join(home, "work")
	events, err := os.ReadFile(filepath.Join("..", "testdata", "events.ndjson"))
	if err != nil {
		t.Fatal(err)
	}
	os.MkdirAll(filepath.Join(work, "testdata"), 0o700)
	if err := os.WriteFile(filepath.Join(work, "testdata", "events.ndjson"), events, 0o600); err != nil {
		t.Fatal(err)
	}
	tr := &tour{bin: bin, dir: work, env: []string{
		"PATH=" + filepath.Dir(bin) + string(os.PathListSeparator) + os.Getenv("PATH"),
		"HOME=" + home, "XDG_STATE_HOME=" + filepath.Join(home, "state"), "XDG_CONFIG_HOME=" + filepath.Join(home, "config"),
		"NO_COLOR=1",
		// A free port, which serve then prints an EVFWD_ENDPOINT line for.
		"EVFWD_ADDR=127.0.0.1:0",
	}}
	tr.run(t, "Sign and verify in CI — exit codes do the talking:")
	tr.run(t, "Test your webhook endpoint, or a sender, locally:")
	tr.run(t, "Import history and pipe events:")

	serve := tr.serve
	if serve == nil {
		t.Fatal("README's tour starts no serve")
	}
	metrics := get(t, serve.printed["EVFWD_ENDPOINT"]+"/metrics")
	if want := `evfwd_ingested_total{source="dev"} 21`; !strings.Contains(metrics, want) { // 1 track + 20 lines
		t.Errorf("serve's /metrics lack %q", want)
	}
	if b, err := os.ReadFile(filepath.Join(work, "rejected.ndjson")); err == nil && len(b) > 0 {
		t.Errorf("rejected lines:\n%s", b)
	}

	// A server stopped by Ctrl-C exits 0; a --count wait cut short, 130.
	serve.signal(t, os.Interrupt)
	if code := serve.wait(t); code != 0 {
		t.Errorf("serve after Ctrl-C: exit %d, want 0\n%s", code, serve.stderr())
	}
	for _, tt := range []struct {
		args []string
		code int
	}{
		{[]string{"listen", "--addr", "127.0.0.1:0"}, 0},
		{[]string{"listen", "--addr", "127.0.0.1:0", "--count", "1"}, 130},
	} {
		l := start(t, work, tr.env, bin, tt.args...)
		l.waitFor(t, regexp.MustCompile(`^listening on `))
		l.signal(t, os.Interrupt)
		if code := l.wait(t); code != tt.code {
			t.Errorf("%v after Ctrl-C: exit %d, want %d\n%s", tt.args, code, tt.code, l.stderr())
		}
	}
}

// listenAddr is where the README's listen runs; the test's runs on a free
// port, which later lines are rewritten to.
const listenAddr = "127.0.0.1:8788"

// tour runs README lines in order, keeping what a shell would: variables,
// the servers in the background and the last one's $!.
type tour struct {
	bin, dir string
	env      []string
	addr     string   // the running listen's host:port, for listenAddr
	serve    *process // started by an "evfwd serve &" line
	last     *process // $!
}

var assign = regexp.MustCompile(`^([A-Z_]+)=\$\((.+)\)$`)

func (tr *tour) run(t *testing.T, intro string) {
	t.Helper()
	for _, line := range readmeBlock(t, intro) {
		if tr.addr != "" {
			line = strings.ReplaceAll(line, listenAddr, tr.addr)
		}
		t.Logf("$ %s", line)
		background := strings.HasSuffix(line, "&")
		args := strings.Fields(strings.TrimSuffix(line, "&"))
		switch {
		case background && strings.HasPrefix(line, "evfwd serve"):
			tr.serve = tr.start(t, args[1:]...)
			tr.serve.printed = tr.serve.exports(t)
			// What the newcomer pastes; the endpoint only because of the port.
			tr.env = append(tr.env, "EVFWD_ENDPOINT="+tr.serve.printed["EVFWD_ENDPOINT"])
		case background && strings.HasPrefix(line, "evfwd listen"):
			l := tr.start(t, append(args[1:], "--addr", "127.0.0.1:0")...)
			tr.addr = l.waitFor(t, regexp.MustCompile(`^listening on https?://(\S+)`))[1]
		case background:
			t.Fatalf("README: %q: the test knows no such server", line)
		case line == "kill $!":
			if tr.last == nil {
				t.Fatalf("README: %q with nothing in the background", line)
			}
			tr.last.signal(t, syscall.SIGTERM)
			if code := tr.last.wait(t); code != 0 {
				t.Fatalf("%v after %s: exit %d, want 0\n%s", tr.last.cmd.Args, line, code, tr.last.stderr())
			}
			tr.last, tr.addr = nil, ""
		case strings.HasPrefix(line, "export "):
			name, _, _ := strings.Cut(strings.TrimPrefix(line, "export "), "=")
			if tr.serve == nil || tr.serve.printed[name] == "" {
				t.Fatalf("README: %q, but serve printed no line for %s", line, name)
			}
			tr.env = append(tr.env, name+"="+tr.serve.printed[name])
		case assign.MatchString(line):
			m := assign.FindStringSubmatch(line)
			tr.env = append(tr.env, m[1]+"="+strings.TrimSpace(tr.sh(t, m[2])))
		default:
			if strings.HasPrefix(line, "evfwd trigger") {
				// Retries a few milliseconds apart, not seconds.
				line += " --retry-initial 10ms"
			}
			tr.sh(t, line)
		}
	}
}

// sh runs line and returns its stdout; it must exit 0 within 10 s (a
// server missing its "&" would otherwise hang the test).
func (tr *tour) sh(t *testing.T, line string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "sh", "-c", line)
	cmd.Dir, cmd.Env = tr.dir, tr.env
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s: %v\n%s%s", line, err, out, stderr.String())
	}
	return string(out)
}

func (tr *tour) start(t *testing.T, args ...string) *process {
	t.Helper()
	tr.last = start(t, tr.dir, tr.env, tr.bin, args...)
	return tr.last
}

// buildEvfwd builds the binary into the test's temporary directory.
func buildEvfwd(t *testing.T) string {
	t.Helper()
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command to build evfwd with")
	}
	bin := filepath.Join(t.TempDir(), "bin", "evfwd")
	if out, err := exec.Command(gobin, "build", "-o", bin, "..").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// readmeBlock returns the command lines of the first sh block after the
// line intro in the README, each without its trailing comment.
func readmeBlock(t *testing.T, intro string) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(b), "\n"+intro+"\n\n```sh\n")
	if !ok {
		t.Fatalf("README has no sh block after %q", intro)
	}
	body, _, _ := strings.Cut(rest, "```")
	var lines []string
	for _, l := range strings.Split(strings.TrimSpace(body), "\n") {
		if i := strings.Index(l, "  #"); i >= 0 {
			l = l[:i]
		}
		lines = append(lines, strings.TrimSpace(l))
	}
	return lines
}

func get(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// process is a running evfwd whose stderr lines are read as they come.
type process struct {
	cmd     *exec.Cmd
	lines   chan string // stderr, a line at a time; closed at EOF
	seen    strings.Builder
	printed map[string]string // serve: the export lines it printed
}

func start(t *testing.T, dir string, env []string, bin string, args ...string) *process {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Dir, cmd.Env = dir, env
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill() }) // a test that failed midway; done after wait
	// Room for every line a run logs, so that stderr never blocks it.
	p := &process{cmd: cmd, lines: make(chan string, 4096)}
	go func() {
		defer close(p.lines)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			p.lines <- sc.Text()
		}
	}()
	return p
}

// waitFor reads stderr up to a line that matches re, and returns it.
func (p *process) waitFor(t *testing.T, re *regexp.Regexp) []string {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case line, ok := <-p.lines:
			if !ok {
				t.Fatalf("%v ended before a line matching %s:\n%s", p.cmd.Args, re, p.seen.String())
			}
			p.seen.WriteString(line + "\n")
			if m := re.FindStringSubmatch(line); m != nil {
				return m
			}
		case <-timeout:
			t.Fatalf("%v: no line matching %s in 10s:\n%s", p.cmd.Args, re, p.seen.String())
		}
	}
}

// exports reads serve's export lines, up to the endpoint's (the last one
// when the port is not the default).
func (p *process) exports(t *testing.T) map[string]string {
	t.Helper()
	re := regexp.MustCompile(`^  export (EVFWD_[A-Z_]+)=(\S+)$`)
	got := map[string]string{}
	for got["EVFWD_ENDPOINT"] == "" {
		m := p.waitFor(t, re)
		got[m[1]] = m[2]
	}
	return got
}

func (p *process) signal(t *testing.T, sig os.Signal) {
	t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
		t.Error(err)
	}
}

// wait drains stderr and returns the exit code.
func (p *process) wait(t *testing.T) int {
	t.Helper()
	for line := range p.lines {
		p.seen.WriteString(line + "\n")
	}
	err := p.cmd.Wait()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatal(err)
	}
	return p.cmd.ProcessState.ExitCode()
}

func (p *process) stderr() string { return p.seen.String() }
