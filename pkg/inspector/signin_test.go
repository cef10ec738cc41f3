package inspector_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/evfwd/evfwd/pkg/inspector"
)

// redeemLink POSTs the code of a sign-in link as the page does, and
// returns the status and the session it answered ("" when none).
func (b *serveBench) redeemLink(t *testing.T, link string) (int, string) {
	t.Helper()
	page, code, ok := strings.Cut(link, inspector.SignInFragment)
	if !ok || page != b.ui.URL+"/" {
		t.Fatalf("link %q: want %s/%sCODE", link, b.ui.URL, inspector.SignInFragment)
	}
	status, body, _ := b.call(t, nil, "POST", "/api/session", `{"code":"`+code+`"}`, "Content-Type", "application/json")
	var s struct{ Session string }
	json.Unmarshal(body, &s)
	return status, s.Session
}

// A sign-in link opens a session once, within SignInTTL, and holds no
// admin token (issue 30, row 2).
func TestServeSignInLink(t *testing.T) {
	b := newServeBench(t, nil)
	link := b.insp.SignInLink(b.ui.URL + "/")
	if strings.Contains(link, adminToken) || strings.Contains(link, "?") {
		t.Errorf("link %q: holds the token, or a query the server would see", link)
	}
	status, session := b.redeemLink(t, link)
	if status != 200 || session == "" || !b.authed(t, inspector.SessionHeader, session) {
		t.Fatalf("first use: %d, session %q", status, session)
	}
	if status, session := b.redeemLink(t, link); status != 403 || session != "" {
		t.Errorf("second use: %d, session %q; want 403", status, session)
	}

	late := b.insp.SignInLink(b.ui.URL + "/")
	b.clock.Add(inspector.SignInTTL)
	if status, _ := b.redeemLink(t, late); status != 403 {
		t.Errorf("used after %v: %d, want 403", inspector.SignInTTL, status)
	}
	inTime := b.insp.SignInLink(b.ui.URL + "/")
	b.clock.Add(inspector.SignInTTL - time.Second)
	if status, _ := b.redeemLink(t, inTime); status != 200 {
		t.Errorf("used within %v: %d, want 200", inspector.SignInTTL, status)
	}
	// Two links are two codes, each good once.
	one, two := b.insp.SignInLink(b.ui.URL+"/"), b.insp.SignInLink(b.ui.URL+"/")
	if one == two {
		t.Fatal("two links alike")
	}
	for _, l := range []string{two, one} {
		if status, _ := b.redeemLink(t, l); status != 200 {
			t.Errorf("%s: %d", l, status)
		}
	}
}

// Guessing codes counts as wrong admin tokens: the address is locked out.
func TestServeSignInLinkGuessesLockOut(t *testing.T) {
	b := newServeBench(t, nil)
	link := b.insp.SignInLink(b.ui.URL + "/")
	page, _, _ := strings.Cut(link, inspector.SignInFragment)
	var last int
	for range 6 {
		last, _ = b.redeemLink(t, page+inspector.SignInFragment+"guess")
	}
	if last != 429 {
		t.Errorf("sixth wrong code: %d, want 429", last)
	}
	if status, _ := b.redeemLink(t, link); status != 429 {
		t.Errorf("the right link from a locked-out address: %d, want 429", status)
	}
}
