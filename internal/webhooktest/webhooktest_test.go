package webhooktest

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/evfwd/evfwd/internal/broadcast"
	"github.com/evfwd/evfwd/internal/testmain"
)

func TestMain(m *testing.M) { testmain.Run(m) }

func post(t *testing.T, url, body string) (int, string, error) {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), nil
}

func TestScriptLastRepeats(t *testing.T) {
	r := New(t, Script(Reply{Status: 503, Header: []string{"Retry-After", "7"}}, Reply{Body: "fine"}))
	var got []string
	for i := range 3 {
		code, body, err := post(t, r.URL+"/in", `{"n":`+string(rune('0'+i))+`}`)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, http.StatusText(code)+":"+body)
	}
	if want := "Service Unavailable:Service Unavailable OK:fine OK:fine"; strings.Join(got, " ") != want {
		t.Errorf("answers %q, want %q", got, want)
	}
	reqs := r.Requests()
	if len(reqs) != 3 || r.Count() != 3 || reqs[2].Method != http.MethodPost || reqs[2].Path != "/in" ||
		string(reqs[2].Body) != `{"n":2}` || reqs[2].Header.Get("Content-Type") != "application/json" {
		t.Errorf("requests %+v", reqs)
	}
}

// A held request is counted in flight, on its receiver and a shared
// gauge, until Release; later requests then pass at once.
func TestHangUntilRelease(t *testing.T) {
	var s broadcast.Signal
	var g Gauge
	r := New(t, Script(Reply{Hang: true}), Notify(&s), Share(&g))
	done := make(chan int, 2)
	for range 2 {
		go func() {
			code, _, _ := post(t, r.URL, "{}")
			done <- code
		}()
	}
	Await(t, &s, "two held", func() bool { now, _ := r.InFlight(); return now == 2 })
	if now, peak := g.Get(); now != 2 || peak != 2 {
		t.Errorf("shared gauge %d, peak %d; want 2, 2", now, peak)
	}
	r.Release()
	for range 2 {
		if code := <-done; code != 200 {
			t.Errorf("released: %d", code)
		}
	}
	if now, peak := r.InFlight(); now != 0 || peak != 2 {
		t.Errorf("in flight %d, peak %d after release; want 0, 2", now, peak)
	}
	if code, _, _ := post(t, r.URL, "{}"); code != 200 {
		t.Errorf("after release: %d", code)
	}
}

func TestDelayAndReset(t *testing.T) {
	r := New(t, Script(Reply{Delay: 10 * time.Millisecond}, Reply{Reset: true}))
	start := time.Now()
	if code, _, err := post(t, r.URL, "{}"); err != nil || code != 200 || time.Since(start) < 10*time.Millisecond {
		t.Errorf("delayed: %d %v after %v", code, err, time.Since(start))
	}
	if _, _, err := post(t, r.URL, "{}"); err == nil {
		t.Error("reset: no error")
	}
}

func TestIDCounter(t *testing.T) {
	c := NewIDCounter(t)
	for _, id := range []string{"a", "b", "a"} {
		post(t, c.URL, `{"type":"track","messageId":"`+id+`"}`)
	}
	post(t, c.URL, `not json`)
	if distinct, dups := c.Tally(); distinct != 2 || dups != 1 {
		t.Errorf("tally %d, %d; want 2, 1", distinct, dups)
	}
	if missing, dups := c.WaitAll(map[string]bool{"a": true, "b": true}, time.Now().Add(WaitLimit)); missing != 0 || dups != 1 {
		t.Errorf("WaitAll of arrived ids: %d missing, %d duplicates", missing, dups)
	}
	go post(t, c.URL, `{"messageId":"c"}`)
	if missing, _ := c.WaitAll(map[string]bool{"a": true, "c": true}, time.Now().Add(WaitLimit)); missing != 0 {
		t.Errorf("WaitAll of c: %d missing", missing)
	}
	if missing, _ := c.WaitAll(map[string]bool{"d": true}, time.Now()); missing != 1 {
		t.Errorf("WaitAll of d, never sent: %d missing, want 1", missing)
	}
	if _, ok := c.First("c"); !ok {
		t.Error("no first arrival of c")
	}
}

func TestClock(t *testing.T) {
	t0 := time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)
	c := NewClock(t0)
	c.Set(t0.Add(time.Hour))
	c.Set(t0) // never backwards
	c.Add(-time.Minute)
	if got, want := c.Now(), t0.Add(59*time.Minute); !got.Equal(want) {
		t.Errorf("Now %v, want %v", got, want)
	}
}
