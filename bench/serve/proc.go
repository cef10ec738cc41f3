//go:build linux

package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// proc is a subprocess the bench started: serve, the null collector or
// trigger. Its output goes to a log file; while it runs its RSS is sampled
// every 100 ms.
type proc struct {
	name string
	cmd  *exec.Cmd
	log  string
	done chan struct{} // closed when the process has exited
	err  error         // Wait's result, once done is closed
	rss  atomic.Int64  // peak kB: sampled VmRSS and VmHWM
}

// procs tracks every process the bench started so that each exit path can
// kill what is still running.
type procs struct {
	mu     sync.Mutex
	all    []*proc
	killed bool // killAll ran: start no more
}

// start runs bin with args and env, its output in dir/name.log. The child
// has its own process group (a Ctrl-C on the bench reaches the bench only,
// which kills it) and dies with the bench (Pdeathsig).
func (ps *procs) start(dir, name, bin string, args, env []string) (*proc, error) {
	p := &proc{name: name, log: fmt.Sprintf("%s/%s.log", dir, name), done: make(chan struct{})}
	out, err := os.Create(p.log)
	if err != nil {
		return nil, err
	}
	p.cmd = exec.Command(bin, args...)
	p.cmd.Env = env
	p.cmd.Stdout, p.cmd.Stderr = out, out
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if ps.killed {
		out.Close()
		return nil, fmt.Errorf("%s: the bench is stopping", name)
	}
	if err := p.cmd.Start(); err != nil {
		out.Close()
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	ps.all = append(ps.all, p)
	go func() {
		p.err = p.cmd.Wait()
		out.Close()
		close(p.done)
	}()
	go p.sample()
	return p, nil
}

// killAll kills every process still running and waits for it.
func (ps *procs) killAll() {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	ps.killed = true
	for _, p := range ps.all {
		select {
		case <-p.done:
		default:
			p.cmd.Process.Kill()
			<-p.done
		}
	}
}

func (p *proc) sample() {
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		p.readRSS()
		select {
		case <-p.done:
			return
		case <-t.C:
		}
	}
}

// readRSS raises p.rss to the process's current VmRSS and VmHWM.
func (p *proc) readRSS() {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.cmd.Process.Pid))
	if err != nil {
		return
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		k, v, _ := strings.Cut(sc.Text(), ":")
		if k != "VmRSS" && k != "VmHWM" {
			continue
		}
		kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		for cur := p.rss.Load(); kb > cur && !p.rss.CompareAndSwap(cur, kb); cur = p.rss.Load() {
		}
	}
}

// cpu is the CPU time (user and system) the process used, once it has
// exited.
func (p *proc) cpu() time.Duration {
	if st := p.cmd.ProcessState; st != nil {
		return st.UserTime() + st.SystemTime()
	}
	return 0
}

// rssMB is the peak RSS seen so far in MB.
func (p *proc) rssMB() float64 { return float64(p.rss.Load()) / 1024 }

// waitReady polls base/healthz until it answers 200.
func (p *proc) waitReady(base string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		select {
		case <-p.done:
			return fmt.Errorf("%s exited before it was ready (%v)%s", p.name, p.err, p.tail())
		default:
		}
		if resp, err := http.Get(base + "/healthz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("%s not ready after %s%s", p.name, timeout, p.tail())
}

// stop reads the peak RSS, sends SIGINT and waits for a clean exit (serve
// drains, writes its CPU profile and exits 0); after timeout it kills.
func (p *proc) stop(timeout time.Duration) error {
	p.readRSS()
	p.cmd.Process.Signal(os.Interrupt)
	select {
	case <-p.done:
	case <-time.After(timeout):
		p.cmd.Process.Kill()
		<-p.done
		return fmt.Errorf("%s did not exit within %s of SIGINT; killed%s", p.name, timeout, p.tail())
	}
	if p.err != nil {
		return fmt.Errorf("%s: %v%s", p.name, p.err, p.tail())
	}
	return nil
}

// wait waits for the process to exit by itself, killing it after timeout.
func (p *proc) wait(ctx context.Context, timeout time.Duration) error {
	select {
	case <-p.done:
	case <-ctx.Done():
		p.cmd.Process.Kill()
		<-p.done
		return ctx.Err()
	case <-time.After(timeout):
		p.cmd.Process.Kill()
		<-p.done
		return fmt.Errorf("%s still running after %s; killed%s", p.name, timeout, p.tail())
	}
	if p.err != nil {
		return fmt.Errorf("%s: %v%s", p.name, p.err, p.tail())
	}
	return nil
}

// tail is the end of the process's log, for errors.
func (p *proc) tail() string {
	b, _ := os.ReadFile(p.log)
	if len(b) > 1500 {
		b = b[len(b)-1500:]
	}
	if len(b) == 0 {
		return ""
	}
	return "\n--- " + p.log + " ---\n" + string(b)
}
