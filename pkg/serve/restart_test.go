package serve_test

import (
	"context"
	"database/sql"
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/evfwd/evfwd/internal/testsize"
	"github.com/evfwd/evfwd/pkg/admin"
	"github.com/evfwd/evfwd/pkg/queued"
	"github.com/evfwd/evfwd/pkg/rawjson"
	"github.com/evfwd/evfwd/pkg/store"
	"github.com/evfwd/evfwd/pkg/store/sqlite"
)

// Issue 31, item 4: serve killed in the middle of a large deletion or
// sync answers ingest at once on its restart, and finishes the work in
// the background without any reader seeing it half done.

// userCounter is a webhook receiver that counts deliveries by message type
// and userId ("track:doomed"), and by messageId.
type userCounter struct {
	*httptest.Server
	mu    sync.Mutex
	users map[string]int
	ids   map[string]int
}

func newUserCounter(t *testing.T) *userCounter {
	c := &userCounter{users: map[string]int{}, ids: map[string]int{}}
	c.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		obj, err := rawjson.ParseObject(body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		typ, _ := obj.GetString("type")
		user, _ := obj.GetString("userId")
		id, _ := obj.GetString("messageId")
		c.mu.Lock()
		c.users[typ+":"+user]++
		c.ids[id]++
		c.mu.Unlock()
	}))
	t.Cleanup(c.Close)
	return c
}

// count reports how many distinct userIds (with prefix, after the type)
// of type typ arrived, and how many deliveries they took.
func (c *userCounter) count(typ, prefix string) (users, deliveries int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, n := range c.users {
		if strings.HasPrefix(k, typ+":"+prefix) {
			users++
			deliveries += n
		}
	}
	return users, deliveries
}

// serveProc runs `evfwd serve` on one config, restarted after kills.
type serveProc struct {
	t      *testing.T
	bin    string
	dir    string
	config string
	addr   string
	logs   processLog
	cmd    *exec.Cmd
}

func newServeProc(t *testing.T, dir string) *serveProc {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	p := &serveProc{t: t, bin: buildEvfwd(t), dir: dir, config: filepath.Join(dir, "evfwd.yaml"), addr: addr}
	t.Cleanup(func() {
		if p.cmd != nil {
			p.cmd.Process.Kill()
			p.cmd.Wait()
		}
	})
	return p
}

// writeConfig writes serve's config: source live sends to rcv; source big
// too when bigOn, else big keeps its deliveries pending.
func (p *serveProc) writeConfig(db, rcv string, bigOn bool) {
	cfg := fmt.Sprintf(`addr: %s
store: sqlite://%s
admin_token: %s
sources:
  - name: live
    write_key: wk_live
    webhooks:
      enabled: true
      shared_secret: s
      endpoints:
        - url: %s
  - name: big
    write_key: wk_big
    webhooks:
      enabled: %t
      shared_secret: s
      endpoints:
        - url: %s
`, p.addr, db, adminToken, rcv, bigOn, rcv)
	if err := os.WriteFile(p.config, []byte(cfg), 0o600); err != nil {
		p.t.Fatal(err)
	}
}

// start starts serve and returns at once.
func (p *serveProc) start() time.Time {
	p.cmd = exec.Command(p.bin, "serve", "--config", p.config, "--log-level", "info")
	p.cmd.Stderr = &p.logs
	p.cmd.Env = append(os.Environ(), "XDG_CONFIG_HOME="+p.dir)
	start := time.Now()
	if err := p.cmd.Start(); err != nil {
		p.t.Fatal(err)
	}
	return start
}

func (p *serveProc) kill() {
	p.cmd.Process.Signal(syscall.SIGKILL)
	p.cmd.Wait()
	p.cmd = nil
}

func (p *serveProc) admin() *admin.Client {
	return &admin.Client{Endpoint: "http://" + p.addr, Token: adminToken}
}

// firstIngest posts one track call to live until it is answered 200 and
// returns when that was; it fails t after limit.
func (p *serveProc) firstIngest(limit time.Duration) time.Time {
	p.t.Helper()
	deadline := time.Now().Add(limit)
	client := &http.Client{Timeout: 5 * time.Second}
	for i := 0; ; i++ {
		body := fmt.Sprintf(`{"userId":"probe","event":"Probe","messageId":"probe%d"}`, i)
		req, _ := http.NewRequest(http.MethodPost, "http://"+p.addr+"/v1/track", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte("wk_live:")))
		resp, err := client.Do(req)
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return time.Now()
			}
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("no 200 from the collection API within %v (last: %v)\n%s", limit, err, p.logs.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// openPeek opens the store's file for the test's own reads beside serve.
func openPeek(t *testing.T, db string) *sql.DB {
	peek, err := sql.Open("sqlite", "file:"+db+"?_pragma=busy_timeout(10000)&mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { peek.Close() })
	return peek
}

// waitRow polls q on peek until it yields true, or fails t after limit.
func waitRow(t *testing.T, peek *sql.DB, what, q string, limit time.Duration, args ...any) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		var ok bool
		if err := peek.QueryRow(q, args...).Scan(&ok); err == nil && ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, limit)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// fillBig stores doomed messages of user doomed in source big, with kept
// messages of user keeper among them (one in every 50), all pending for
// big's webhooks; it returns the kept messages' ids.
func fillBig(t *testing.T, db string, doomed int) map[string]bool {
	t.Helper()
	ctx := context.Background()
	st, err := sqlite.Open(ctx, db, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	kept := map[string]bool{}
	pad := strings.Repeat("x", 200)
	now := time.Now()
	var batch []store.Message
	for i := range doomed {
		user, id := "doomed", fmt.Sprintf("d%d", i)
		if i%50 == 25 {
			user, id = "keeper", fmt.Sprintf("k%d", i)
			kept[id] = true
		}
		obj, err := rawjson.ParseObject(fmt.Appendf(nil, `{"type":"track","userId":%q,"event":"E","messageId":%q,"timestamp":"2026-01-02T03:04:05.000Z","properties":{"pad":%q}}`, user, id, pad))
		if err != nil {
			t.Fatal(err)
		}
		m, err := queued.New("big", obj, now, []string{store.DestinationWebhooks})
		if err != nil {
			t.Fatal(err)
		}
		if batch = append(batch, m); len(batch) == 1000 || i == doomed-1 {
			if err := st.Ingest(ctx, batch); err != nil {
				t.Fatal(err)
			}
			batch = batch[:0]
		}
	}
	return kept
}

// TestRestartMidDeletion kills serve in the middle of deleting a user with
// 150,000 messages (6,000 under -race) and restarts it: the collection
// API must answer at once, while the deletion finishes in the background
// and none of the user's messages is delivered meanwhile (the source's
// webhooks, off before the kill, are on after it).
func TestRestartMidDeletion(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("restart test: runs without -short")
	}
	// Under -race, 6,000: killed at a third (two steps of 1,000), and
	// still running after the restart (the log says so).
	n := testsize.Pick(150_000, 6_000)
	dir := t.TempDir()
	db := filepath.Join(dir, "evfwd.db")
	kept := fillBig(t, db, n)
	rcv := newUserCounter(t)
	p := newServeProc(t, dir)
	p.writeConfig(db, rcv.URL, false)
	p.start()
	p.logs.waitServing(t, 1, 30*time.Second)

	go p.admin().CreateDeletion(context.Background(), "doomed", nil) // cut by the kill
	peek := openPeek(t, db)
	waitRow(t, peek, "deletion a third done", `SELECT coalesce(sum(ds.purged), 0) >= ? FROM deletion_sources ds
		JOIN deletions d ON d.id = ds.deletion WHERE d.done_at = 0`, 2*time.Minute, n/3)
	p.kill()
	var id string
	var purged int
	if err := peek.QueryRow(`SELECT d.id, sum(ds.purged) FROM deletions d JOIN deletion_sources ds ON ds.deletion = d.id
		WHERE d.done_at = 0 GROUP BY d.id`).Scan(&id, &purged); err != nil {
		t.Fatalf("no unfinished deletion after the kill: %v", err)
	}

	p.writeConfig(db, rcv.URL, true)
	start := p.start()
	up := p.firstIngest(2 * time.Minute)
	d, err := p.admin().Deletion(context.Background(), id)
	if err != nil {
		t.Fatalf("read the deletion after the restart: %v", err)
	}
	inProgress := !d.Done
	waitRow(t, peek, "deletion done", `SELECT done_at != 0 FROM deletions WHERE id = ?`, 5*time.Minute, id)
	done := time.Now()
	if d, err = p.admin().Deletion(context.Background(), id); err != nil || !d.Done {
		t.Errorf("deletion read once done: %+v, %v; want done", d, err)
	}
	missing := waitKept(t, rcv, kept, time.Now().Add(2*time.Minute))
	if users, deliveries := rcv.count("track", "doomed"); users != 0 {
		t.Errorf("%d deliveries of the user being deleted", deliveries)
	}
	if missing > 0 {
		t.Errorf("%d of %d kept messages not delivered\n%s", missing, len(kept), p.logs.String())
	}
	purgedAll := 0
	for _, s := range d.Sources {
		purgedAll += s.Purged
	}
	if purgedAll != n-len(kept) {
		t.Errorf("%d messages purged, want %d", purgedAll, n-len(kept))
	}
	t.Logf("%d messages, killed with %d purged; restart: first 200 after %v, deletion done after %v (read in progress at first 200: %t); %d kept delivered, 0 deleted",
		n, purged, up.Sub(start).Round(time.Millisecond), done.Sub(start).Round(time.Millisecond), inProgress, len(kept))
	if up.Sub(start) > 2*time.Second {
		t.Errorf("the first 200 came %v after the start, want within 2s", up.Sub(start))
	}
}

// waitKept waits until every id of kept has been delivered or deadline
// passes, and returns how many never were.
func waitKept(t *testing.T, rcv *userCounter, kept map[string]bool, deadline time.Time) int {
	for {
		missing := 0
		rcv.mu.Lock()
		for id := range kept {
			if rcv.ids[id] == 0 {
				missing++
			}
		}
		rcv.mu.Unlock()
		if missing == 0 || time.Now().After(deadline) {
			return missing
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestRestartMidSync kills serve while a committed audience sync of
// 200,000 members (6,000 under -race) moves its messages into the queue,
// and restarts it: the collection API must answer at once, the list every
// reader sees is the new one from the start, a second sync of the audience
// waits for the first to finish and finds nothing changed, and every
// member's identify message is delivered.
func TestRestartMidSync(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("restart test: runs without -short")
	}
	// Under -race, 6,000: twelve chunks of the move, and the kill lands
	// after the flip, before the first chunk has moved (the whole outbox
	// left, in 25 of 25 runs under load; the log shows it). Every member's delivery goes to a receiver
	// in this race-instrumented process, which is most of the test's CPU.
	n := testsize.Pick(200_000, 6_000)
	dir := t.TempDir()
	db := filepath.Join(dir, "evfwd.db")
	rcv := newUserCounter(t)
	p := newServeProc(t, dir)
	p.writeConfig(db, rcv.URL, true)
	p.start()
	p.logs.waitServing(t, 1, 30*time.Second)

	go p.admin().Sync(context.Background(), store.KindAudience, "Big", []string{"live"}, members(0, n)) // cut by the kill
	peek := openPeek(t, db)
	waitRow(t, peek, "sync committed, moving", `SELECT EXISTS (SELECT 1 FROM sync_runs WHERE committed)
		AND EXISTS (SELECT 1 FROM sync_outbox)`, 5*time.Minute)
	p.kill()
	var outbox int
	if err := peek.QueryRow(`SELECT count(*) FROM sync_outbox`).Scan(&outbox); err != nil || outbox == 0 {
		t.Fatalf("the sync finished before the kill (%d in the outbox, %v)", outbox, err)
	}

	start := p.start()
	up := p.firstIngest(2 * time.Minute)
	var listed int
	if err := peek.QueryRow(`SELECT count(*) FROM syncs s JOIN sync_lists l ON l.list = s.list`).Scan(&listed); err != nil || listed != n {
		t.Errorf("the audience lists %d at the first 200 (%v), want the new list's %d", listed, err, n)
	}
	again := time.Now()
	rep, err := p.admin().Sync(context.Background(), store.KindAudience, "Big", []string{"live"}, members(0, n))
	if err != nil {
		t.Fatalf("second sync: %v", err)
	}
	if rep.Unchanged != n || rep.Messages != 0 {
		t.Errorf("second sync: %+v, want %d unchanged and no messages", rep, n)
	}
	secondDone := time.Now()
	waitRow(t, peek, "recovery done", `SELECT NOT EXISTS (SELECT 1 FROM sync_runs) AND NOT EXISTS (SELECT 1 FROM sync_outbox)`, time.Minute)
	deadline := time.Now().Add(5 * time.Minute)
	users, deliveries := 0, 0
	for time.Now().Before(deadline) {
		if users, deliveries = rcv.count("identify", "user_"); users == n {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if users != n {
		t.Errorf("identify messages of %d members delivered, want %d", users, n)
	}
	t.Logf("%d members, killed with %d in the outbox; restart: first 200 after %v, second sync answered after %v (%v after it was sent); %d delivered for %d members",
		n, outbox, up.Sub(start).Round(time.Millisecond), secondDone.Sub(start).Round(time.Millisecond),
		secondDone.Sub(again).Round(time.Millisecond), deliveries, users)
	if up.Sub(start) > 2*time.Second {
		t.Errorf("the first 200 came %v after the start, want within 2s", up.Sub(start))
	}
}
