package receiver

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"
)

// closeGuard is how long a test waits for the server to close a
// connection before failing; the timeouts under test are far shorter.
const closeGuard = 10 * time.Second

// rawServer runs h behind an http.Server with the given ReadTimeout, as
// evfwd listen does, and returns its address. (Not httptest's: its Close
// waits out the pause net/http makes before closing a connection whose
// body it refused.)
func rawServer(t *testing.T, h http.Handler, readTimeout time.Duration) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &http.Server{Handler: h, ReadHeaderTimeout: readTimeout, ReadTimeout: readTimeout}
	go s.Serve(ln)
	t.Cleanup(func() { s.Close() })
	return ln.Addr().String()
}

// dial opens a connection and writes the first part of a request.
func dial(t *testing.T, addr, first string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if _, err := io.WriteString(c, first); err != nil {
		t.Fatal(err)
	}
	return c
}

// answer reads the status line and then everything up to the end of the
// connection; it fails when the server keeps the connection open.
func answer(t *testing.T, c net.Conn) (status string) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(closeGuard))
	br := bufio.NewReader(c)
	line, err := br.ReadString('\n')
	if err != nil {
		t.Fatalf("no answer: %v", err)
	}
	if _, err := io.Copy(io.Discard, br); err != nil {
		t.Fatalf("connection not closed by the server: %v", err)
	}
	return strings.TrimSpace(line)
}

func head(te string) string {
	return "POST /hooks HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n" + te + "\r\n"
}

func chunk(s string) string { return fmt.Sprintf("%x\r\n%s\r\n", len(s), s) }

// recorded reads back the one record in file, checking that every line
// of it parses.
func recorded(t *testing.T, file []byte) *Record {
	t.Helper()
	var recs []*Record
	for i, line := range bytes.SplitAfter(file, []byte("\n")) {
		if len(line) > 0 && (!json.Valid(line) || line[len(line)-1] != '\n') {
			t.Fatalf("record line %d is not a whole JSON line: %q", i+1, line)
		}
	}
	for rec, err := range ReadRecords(bytes.NewReader(file)) {
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, rec)
	}
	if len(recs) != 1 {
		t.Fatalf("%d records, want 1:\n%s", len(recs), file)
	}
	return recs[0]
}

// TestBodyRefused: a body that is too large or does not arrive whole is
// answered, its connection closed, and recorded without any of its bytes.
func TestBodyRefused(t *testing.T) {
	const limit = 1000
	const short, long = 100 * time.Millisecond, time.Minute
	part := strings.Repeat("x", 100)
	tests := []struct {
		name        string
		readTimeout time.Duration // long: the answer must not wait for it
		send        string
		dribble     bool // then one byte at a time until the server hangs up
		hangUp      bool // then close the sending side
		wantStatus  string
		wantSize    int
		wantReason  string
	}{
		{
			name: "content-length over limit", readTimeout: long,
			send:       head("Content-Length: 1001\r\n"),
			wantStatus: "HTTP/1.1 413 Request Entity Too Large", wantSize: 0,
			wantReason: "body too large: Content-Length 1001 is over the 1000-byte limit",
		},
		{
			name: "chunked over limit, then stalls", readTimeout: long,
			send:       head("Transfer-Encoding: chunked\r\n") + strings.Repeat(chunk(part), 11),
			wantStatus: "HTTP/1.1 413 Request Entity Too Large", wantSize: limit + 1,
			wantReason: "body too large: over the 1000-byte limit",
		},
		{
			name: "chunked over limit, whole", readTimeout: long,
			send:       head("Transfer-Encoding: chunked\r\n") + strings.Repeat(chunk(part), 20) + "0\r\n\r\n",
			wantStatus: "HTTP/1.1 413 Request Entity Too Large", wantSize: limit + 1,
			wantReason: "body too large: over the 1000-byte limit",
		},
		{
			name: "stalls mid-body", readTimeout: short,
			send:       head("Content-Length: 500\r\n") + part,
			wantStatus: "HTTP/1.1 408 Request Timeout", wantSize: 100,
			wantReason: "body timed out: 100 of 500 bytes arrived",
		},
		{
			name: "chunked stalls mid-body", readTimeout: short,
			send:       head("Transfer-Encoding: chunked\r\n") + chunk(part),
			wantStatus: "HTTP/1.1 408 Request Timeout", wantSize: 100,
			wantReason: "body timed out: 100 bytes arrived",
		},
		{
			name: "stalls before the body", readTimeout: short,
			send:       head("Content-Length: 500\r\n"),
			wantStatus: "HTTP/1.1 408 Request Timeout", wantSize: 0,
			wantReason: "body timed out: 0 of 500 bytes arrived",
		},
		{
			name: "dribbles", readTimeout: short,
			send: head("Content-Length: 900\r\n"), dribble: true,
			wantStatus: "HTTP/1.1 408 Request Timeout", wantSize: -1, // what arrived
		},
		{
			name: "hangs up mid-body", readTimeout: long,
			send: head("Content-Length: 500\r\n") + part, hangUp: true,
			wantStatus: "HTTP/1.1 400 Bad Request", wantSize: 100,
			wantReason: "reading body: unexpected EOF (100 of 500 bytes arrived)",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var file bytes.Buffer
			h, err := New(Options{Secrets: [][]byte{secret}, MaxBodyBytes: limit, Record: &file})
			if err != nil {
				t.Fatal(err)
			}
			addr := rawServer(t, h, tt.readTimeout)
			start := time.Now()
			c := dial(t, addr, tt.send)
			if tt.hangUp {
				c.(*net.TCPConn).CloseWrite()
			}
			if tt.dribble {
				go func() {
					for {
						if _, err := c.Write([]byte("x")); err != nil {
							return // the server hung up
						}
						time.Sleep(time.Millisecond)
					}
				}()
			}
			got := answer(t, c)
			elapsed := time.Since(start)
			if got != tt.wantStatus {
				t.Errorf("answer %q, want %q", got, tt.wantStatus)
			}
			// The server's clock for the body starts after our dial, so a
			// timed-out body cannot end sooner; a refused one must not
			// wait for the deadline at all.
			if strings.Contains(tt.wantStatus, "408") && elapsed < tt.readTimeout {
				t.Errorf("closed after %v, before the %v read timeout", elapsed, tt.readTimeout)
			}
			if tt.readTimeout == long && elapsed > closeGuard {
				t.Errorf("answered after %v", elapsed)
			}
			if err := h.Close(); err != nil {
				t.Fatal(err)
			}
			rec := recorded(t, file.Bytes())
			if rec.Status != statusCode(got) || rec.Refused != RefusedBody || len(rec.RawBody()) != 0 {
				t.Errorf("record: status %d, refused %q, body %q; want %s, refused body, no body", rec.Status, rec.Refused, rec.RawBody(), got)
			}
			if tt.wantSize >= 0 && rec.Size != tt.wantSize {
				t.Errorf("record: size %d, want %d", rec.Size, tt.wantSize)
			}
			if tt.wantReason != "" && rec.Shape.Reason != tt.wantReason {
				t.Errorf("record: reason %q, want %q", rec.Shape.Reason, tt.wantReason)
			}
		})
	}
}

func statusCode(line string) int {
	var proto string
	var code int
	fmt.Sscan(line, &proto, &code)
	return code
}

// TestStalledConnectionsBounded: senders that promise a large body and
// stall cost what they sent, not what they promised, and leave nothing
// behind once gone.
func TestStalledConnectionsBounded(t *testing.T) {
	const conns = 200
	const promised = 4 << 20 // under the default limit
	const sent = 100
	baseGoroutines := runtime.NumGoroutine()
	var base runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&base)

	answered := make(chan *Request, conns)
	h, err := New(Options{OnRequest: func(r *Request) { answered <- r }})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	// Each handler reports when it waits for bytes beyond those sent:
	// by then it has allocated for the body.
	waiting := make(chan struct{}, conns)
	wrapped := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r2 := r.WithContext(r.Context())
		r2.Body = &signalBody{ReadCloser: r.Body, after: sent, waiting: waiting}
		h.ServeHTTP(w, r2)
	})
	addr := rawServer(t, wrapped, time.Minute)
	cs := make([]net.Conn, conns)
	for i := range cs {
		cs[i] = dial(t, addr, head(fmt.Sprintf("Content-Length: %d\r\n", promised))+strings.Repeat("x", sent))
	}
	for range conns {
		<-waiting
	}
	var held runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&held)
	perConn := (int64(held.HeapAlloc) - int64(base.HeapAlloc)) / conns
	t.Logf("heap per stalled connection: %d bytes", perConn)
	if perConn > 96<<10 {
		t.Errorf("each stalled connection holds %d bytes of heap, want under 96 KB (it promised %d)", perConn, promised)
	}

	for _, c := range cs {
		c.Close()
	}
	for range conns {
		if r := <-answered; r.Status != http.StatusBadRequest || r.Body != nil {
			t.Errorf("hung-up sender: status %d, %d body bytes kept", r.Status, len(r.Body))
		}
	}
	waitGoroutines(t, baseGoroutines)
}

// waitGoroutines waits until no more than base (and a few of the runtime's
// and the test server's own) goroutines run, failing after closeGuard.
func waitGoroutines(t *testing.T, base int) {
	t.Helper()
	const slack = 8
	deadline := time.Now().Add(closeGuard)
	for runtime.NumGoroutine() > base+slack {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Fatalf("%d goroutines, %d before:\n%s", runtime.NumGoroutine(), base, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(10 * time.Millisecond) // waiting for a condition, not for luck
	}
}

// signalBody sends on waiting once its reader asks for more than after bytes.
type signalBody struct {
	io.ReadCloser
	after, n int
	waiting  chan<- struct{}
}

func (b *signalBody) Read(p []byte) (int, error) {
	if b.n >= b.after && b.waiting != nil {
		b.waiting <- struct{}{}
		b.waiting = nil
	}
	n, err := b.ReadCloser.Read(p)
	b.n += n
	return n, err
}

// TestRecordLineBound: a body byte takes at most 12 bytes of a record
// line, the factor MaxRecordLine allows for, so that a body within the
// default limit always reads back. (Checked on small bodies of the worst
// kinds: a 5 MB one takes seconds under the race detector.)
func TestRecordLineBound(t *testing.T) {
	const n = 4096
	empty := len((&Request{Method: "POST", Path: "/"}).Line())
	for name, unit := range map[string]string{
		"control":   "\x01",
		"quote":     `"`,
		"invalid":   "\xff",
		"separator": "\u2028",
		"mixed":     "\x01\xff\"\n",
	} {
		body := []byte(strings.Repeat(unit, n/len(unit)))
		line := (&Request{Method: "POST", Path: "/", Body: body}).Line()
		if perByte := float64(len(line)-empty) / float64(len(body)); perByte > 12 {
			t.Errorf("%s: %.1f record bytes per body byte, over the 12 MaxRecordLine allows", name, perByte)
		}
		for rec, err := range ReadRecords(bytes.NewReader(line)) {
			if err != nil || !bytes.Equal(rec.RawBody(), body) {
				t.Errorf("%s: not read back: %v", name, err)
			}
		}
	}
	if MaxRecordLine < 12*DefaultMaxBodyBytes {
		t.Errorf("MaxRecordLine %d is under 12 bytes per body byte", MaxRecordLine)
	}
}
