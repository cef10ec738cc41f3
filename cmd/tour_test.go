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
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/evfwd/evfwd/internal/testmain"
)

// TestTour runs every sh block of the README, as written, one line at a
// time in a fresh home, the way a newcomer goes through it on a fresh
// machine: the demo, go install with the PATH line, then each part of the
// tour against the binary that go install put on that PATH. Every line must
// exit 0. Then it checks what the tour's serve stored, and how the servers
// and a --count wait end on Ctrl-C. A block added to the README is run
// here too, so every command the README shows is one that works.
func TestTour(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds the binary")
	}
	tr := newTour(t)
	blocks := readmeBlocks(t)
	// The servers of the tour run until the README has the reader stop
	// them, before the first block that runs a server in the foreground.
	fg := slices.IndexFunc(blocks, func(b []string) bool { return slices.ContainsFunc(b, isForegroundServer) })
	if fg < 0 {
		fg = len(blocks)
	}
	for _, b := range blocks[:fg] {
		tr.run(t, b)
	}

	serve := tr.serve
	if serve == nil {
		t.Fatal("README's tour starts no serve")
	}
	// Every message the tour sent is delivered to its listen once: the
	// repeats of lines that carry a fixed messageId are not (README:
	// "Sending the same lines again does not send the same webhooks again").
	want := tourMessages(t)
	if got := delivered(t, serve.printed["EVFWD_ENDPOINT"], want); got != want {
		t.Errorf("serve delivered %d webhooks, want %d", got, want)
	}
	if b, err := os.ReadFile(filepath.Join(tr.dir, "rejected.ndjson")); err == nil && len(b) > 0 {
		t.Errorf("rejected lines:\n%s", b)
	}

	// A server stopped by Ctrl-C exits 0; a --count wait cut short, 130.
	tr.stopBackground(t)
	bin := tr.lookPath(t)
	for _, b := range blocks[fg:] {
		tr.run(t, b)
	}
	for _, tt := range []struct {
		args []string
		code int
	}{
		{[]string{"listen", "--addr", "127.0.0.1:0"}, 0},
		{[]string{"listen", "--addr", "127.0.0.1:0", "--count", "1"}, 130},
	} {
		l := start(t, tr.dir, tr.env, bin, tt.args...)
		l.waitFor(t, regexp.MustCompile(`^listening on `))
		l.signal(t, os.Interrupt)
		if code := l.wait(t); code != tt.code {
			t.Errorf("%v after Ctrl-C: exit %d, want %d\n%s", tt.args, code, tt.code, l.stderr())
		}
	}
}

// tourMessages is how many distinct messages the README's tour sends to
// serve: two tracks, the sample file, its track lines through grep (new
// messages, but for a fixed messageId), and the file again through gzip
// (new but for its fixed messageIds).
func tourMessages(t *testing.T) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "testdata", "events.ndjson"))
	if err != nil {
		t.Fatal(err)
	}
	var lines, fixed, tracks, fixedTracks int
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		track, id := strings.Contains(l, `"type":"track"`), strings.Contains(l, `"messageId"`)
		lines++
		if id {
			fixed++
		}
		if track {
			tracks++
			if id {
				fixedTracks++
			}
		}
	}
	return 2 + lines + (tracks - fixedTracks) + (lines - fixed)
}

// delivered waits until serve has nothing left to deliver for the dev
// source and at least want deliveries done (or 10 s passed), and returns
// how many it delivered.
func delivered(t *testing.T, endpoint string, want int) int {
	t.Helper()
	count := regexp.MustCompile(`(?m)^evfwd_delivered_total\{source="dev"\} (\d+)$`)
	pending := regexp.MustCompile(`(?m)^evfwd_queue_depth\{source="dev"\} 0$`)
	deadline := time.Now().Add(10 * time.Second)
	for {
		metrics := get(t, endpoint+"/metrics")
		n := 0
		if m := count.FindStringSubmatch(metrics); m != nil {
			n, _ = strconv.Atoi(m[1])
		}
		if (n >= want && pending.MatchString(metrics)) || time.Now().After(deadline) {
			return n
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// listenAddr is where the README's listen runs; the test's runs on a free
// port, which the lines are rewritten to.
const listenAddr = "127.0.0.1:8788"

// tour runs README lines in order, keeping what a shell would: variables,
// the servers in the background and the last one's $!.
type tour struct {
	repo, dir string // the clone (for go commands) and the folder the tour runs in
	env       []string
	addr      string     // the host:port that stands for listenAddr while a listen runs or is awaited
	serve     *process   // started by an "evfwd serve ... &" line
	last      *process   // $!
	bg        []*process // running in the background
}

// newTour makes a fresh home with a work folder holding the sample events.
// Its environment is a fresh machine's but for the Go caches (so that go
// install does not download or rebuild everything) and a PATH without
// evfwd on it: the README's install lines put it there.
func newTour(t *testing.T) *tour {
	t.Helper()
	home := t.TempDir()
	work := filepath.Join(home, "work")
	os.MkdirAll(filepath.Join(work, "testdata"), 0o700)
	for _, name := range []string{"events.ndjson", "destinations.yaml"} {
		b, err := os.ReadFile(filepath.Join("..", "testdata", name))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(work, "testdata", name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	repo, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	env := []string{
		"PATH=" + pathWithoutEvfwd(), "GOBIN=",
		"HOME=" + home, "XDG_STATE_HOME=" + filepath.Join(home, "state"), "XDG_CONFIG_HOME=" + filepath.Join(home, "config"),
		"NO_COLOR=1",
		// A free port, which serve then prints an EVFWD_ENDPOINT line for.
		"EVFWD_ADDR=127.0.0.1:0",
	}
	for _, name := range []string{"GOCACHE", "GOMODCACHE", "GOFLAGS", "GOTOOLCHAIN"} {
		out, err := exec.Command("go", "env", name).Output()
		if err != nil {
			t.Skipf("no go command: %v", err)
		}
		env = append(env, name+"="+strings.TrimSpace(string(out)))
	}
	// Everything is in the module cache already; a fresh machine would
	// download it.
	env = append(env, "GOPROXY=off")
	// go install puts evfwd in a GOPATH kept between runs, where it does
	// not link again a binary that is up to date (2.3 CPU-seconds).
	gopath, err := testmain.CacheDir("tour-gopath")
	if err != nil {
		t.Fatal(err)
	}
	env = append(env, "GOPATH="+gopath)
	return &tour{repo: repo, dir: work, env: env}
}

// pathWithoutEvfwd is $PATH without the folders that hold an evfwd, so
// that only the README's install lines can put one there.
func pathWithoutEvfwd() string {
	var dirs []string
	for _, dir := range filepath.SplitList(os.Getenv("PATH")) {
		if _, err := os.Stat(filepath.Join(dir, "evfwd")); err != nil {
			dirs = append(dirs, dir)
		}
	}
	return strings.Join(dirs, string(os.PathListSeparator))
}

var (
	assign = regexp.MustCompile(`^([A-Z_]+)=\$\((.+)\)$`)
	export = regexp.MustCompile(`^export ([A-Z_]+)=(.*)$`)
)

// isForegroundServer: a line that starts a server with its page (--ui) and
// is not sent to the background: the reader opens the page, then stops it.
func isForegroundServer(line string) bool {
	return !strings.HasSuffix(line, "&") && strings.Contains(line, " --ui") &&
		(strings.Contains(line, "evfwd listen") || strings.Contains(line, "evfwd serve"))
}

func (tr *tour) run(t *testing.T, block []string) {
	t.Helper()
	for _, line := range block {
		if strings.Contains(line, listenAddr) {
			if tr.addr == "" {
				// A line names listen's address before listen runs (serve
				// --forward-to): the listen that follows takes this port.
				tr.addr = strings.TrimPrefix(closedURL(t), "http://")
			}
			line = strings.ReplaceAll(line, listenAddr, tr.addr)
		}
		t.Logf("$ %s", line)
		background := strings.HasSuffix(line, "&")
		args := strings.Fields(strings.TrimSuffix(line, "&"))
		switch {
		case line == "go test -race ./...":
			// This test is one of them.
		case strings.HasPrefix(line, "go "):
			tr.shIn(t, tr.repo, line, 3*time.Minute)
		case background && strings.HasPrefix(line, "evfwd serve"):
			tr.serve = tr.start(t, args[1:]...)
			tr.serve.printed = tr.serve.exports(t)
			// What the newcomer pastes; the endpoint only because of the port.
			tr.env = append(tr.env, "EVFWD_ENDPOINT="+tr.serve.printed["EVFWD_ENDPOINT"])
		case background && strings.HasPrefix(line, "evfwd listen"):
			addr := tr.addr
			if addr == "" {
				addr = "127.0.0.1:0"
			}
			l := tr.start(t, append(args[1:], "--addr", addr)...)
			tr.addr = l.waitFor(t, regexp.MustCompile(`^listening on https?://(\S+)`))[1]
		case background:
			t.Fatalf("README: %q: the test knows no such server", line)
		case isForegroundServer(line):
			tr.openPage(t, line)
		case line == "kill $!" || line == "wait $!":
			tr.endLast(t, line)
		case export.MatchString(line):
			tr.export(t, line)
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

// export sets a variable as the line does. The EVFWD_ ones stand for what
// serve printed, which the README shows elided (wk_dev_...).
func (tr *tour) export(t *testing.T, line string) {
	t.Helper()
	name := export.FindStringSubmatch(line)[1]
	if !strings.HasPrefix(name, "EVFWD_") {
		tr.env = append(tr.env, name+"="+tr.sh(t, line+` && printf %s "$`+name+`"`))
		return
	}
	if tr.serve == nil || tr.serve.printed[name] == "" {
		t.Fatalf("README: %q, but serve printed no line for %s", line, name)
	}
	tr.env = append(tr.env, name+"="+tr.serve.printed[name])
}

// endLast ends $!: kill stops it, wait waits for its own end; either way
// it must exit 0.
func (tr *tour) endLast(t *testing.T, line string) {
	t.Helper()
	p := tr.last
	if p == nil {
		t.Fatalf("README: %q with nothing in the background", line)
	}
	if line == "kill $!" {
		p.signal(t, syscall.SIGTERM)
	}
	if code := p.wait(t); code != 0 {
		t.Fatalf("%v after %s: exit %d, want 0\n%s", p.cmd.Args, line, code, p.stderr())
	}
	tr.bg = slices.DeleteFunc(tr.bg, func(q *process) bool { return q == p })
	if p == tr.serve {
		tr.serve = nil
	}
	tr.last, tr.addr = nil, ""
}

// stopBackground stops what the tour left running with Ctrl-C, as the
// README has the reader do; a server stopped so exits 0.
func (tr *tour) stopBackground(t *testing.T) {
	t.Helper()
	for _, p := range tr.bg {
		p.signal(t, os.Interrupt)
		if code := p.wait(t); code != 0 {
			t.Errorf("%v after Ctrl-C: exit %d, want 0\n%s", p.cmd.Args, code, p.stderr())
		}
	}
	tr.bg, tr.last, tr.addr = nil, nil, ""
}

// openPage runs a server line in the foreground as the reader does, on
// free ports: once it prints its page's address, the page must load; then
// Ctrl-C, and exit 0.
func (tr *tour) openPage(t *testing.T, line string) {
	t.Helper()
	if strings.Contains(line, "openssl") {
		if _, err := exec.LookPath("openssl"); err != nil {
			t.Logf("no openssl on this machine: %q not run", line)
			return
		}
	}
	line += " --ui-addr 127.0.0.1:0"
	if strings.Contains(line, "evfwd listen") {
		line += " --addr 127.0.0.1:0"
	}
	// exec, after any VAR=value words, so that Ctrl-C reaches evfwd.
	p := start(t, tr.dir, tr.env, "sh", "-c", strings.Replace(line, "evfwd ", "exec evfwd ", 1))
	page := p.waitFor(t, regexp.MustCompile(`inspector on (https?://[^\s"]+)`))[1]
	if body := get(t, page); !strings.Contains(body, "<html") {
		t.Errorf("%s: %s is not a page:\n%.200s", line, page, body)
	}
	p.signal(t, os.Interrupt)
	if code := p.wait(t); code != 0 {
		t.Errorf("%s after Ctrl-C: exit %d, want 0\n%s", line, code, p.stderr())
	}
}

// sh runs line in the tour's folder and returns its stdout; it must exit 0
// within 10 s (a server missing its "&" would otherwise hang the test).
func (tr *tour) sh(t *testing.T, line string) string {
	t.Helper()
	return tr.shIn(t, tr.dir, line, 10*time.Second)
}

func (tr *tour) shIn(t *testing.T, dir, line string, timeout time.Duration) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "sh", "-c", line)
	cmd.Dir, cmd.Env = dir, tr.env
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s: %v\n%s%s", line, err, out, stderr.String())
	}
	return string(out)
}

// start runs evfwd, from the PATH the tour's lines made, in the background.
func (tr *tour) start(t *testing.T, args ...string) *process {
	t.Helper()
	bin := tr.lookPath(t)
	tr.last = start(t, tr.dir, tr.env, bin, args...)
	tr.bg = append(tr.bg, tr.last)
	return tr.last
}

// lookPath finds evfwd on the tour's PATH, as the shell would.
func (tr *tour) lookPath(t *testing.T) string {
	t.Helper()
	path := strings.TrimSpace(tr.sh(t, "command -v evfwd"))
	if path == "" {
		t.Fatal("evfwd is not on the tour's PATH: the README's install lines did not put it there")
	}
	return path
}

// readmeBlocks returns the command lines of every sh block in the README,
// in order, each line without its trailing comment.
func readmeBlocks(t *testing.T) [][]string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	var blocks [][]string
	rest := string(b)
	for {
		var ok bool
		if _, rest, ok = strings.Cut(rest, "\n```sh\n"); !ok {
			break
		}
		var body string
		body, rest, _ = strings.Cut(rest, "\n```")
		var lines []string
		for _, l := range strings.Split(body, "\n") {
			if i := strings.Index(l, "  #"); i >= 0 {
				l = l[:i]
			}
			if l = strings.TrimSpace(l); l != "" {
				lines = append(lines, l)
			}
		}
		blocks = append(blocks, lines)
	}
	if len(blocks) == 0 {
		t.Fatal("README has no sh block")
	}
	return blocks
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
