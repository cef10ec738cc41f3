package webhook

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestRedactURL(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"https://hooks.example/in", "https://hooks.example/in"},
		{"https://hooks.example:8443/in?token=SENTINEL", "https://hooks.example:8443/in?token=****"},
		{"https://hooks.example/in?a=1&token=SENTINEL&b", "https://hooks.example/in?a=****&token=****&****"},
		{"https://user:SENTINEL@hooks.example/in", "https://****@hooks.example/in"},
		{"https://SENTINEL@hooks.example/in", "https://****@hooks.example/in"},
		{"HTTP://h.example/in#SENTINEL", "http://h.example/in#****"},
		{"http://[::1]:9/x?", "http://[::1]:9/x?"},
		{"https:///path", "https:///path"},
		{"hooks.example/in?k=SENTINEL", "hooks.example/in?k=****"},
		{"billing", "billing"},
		{"", ""},
		{"https://user:SENTINEL/x", "https://****"},     // does not parse
		{"http://h.example/%zzSENTINEL", "http://****"}, // does not parse
		{"https://h.example/a%20b?x=%41", "https://h.example/a%20b?x=****"},
	} {
		got := RedactURL(tc.in)
		if got != tc.want {
			t.Errorf("RedactURL(%q) = %q, want %q", tc.in, got, tc.want)
		}
		if again := RedactURL(got); again != got {
			t.Errorf("RedactURL(%q) = %q, not idempotent", got, again)
		}
	}
}

func TestEndpointDisplay(t *testing.T) {
	if got := (&Endpoint{Name: "billing", URL: "https://h.example/?token=SENTINEL"}).Display(); got != "billing" {
		t.Errorf("Display = %q, want the name", got)
	}
	if got := (&Endpoint{URL: "https://h.example/?token=SENTINEL"}).Display(); got != "https://h.example/?token=****" {
		t.Errorf("Display = %q", got)
	}
}

// TestValidateNoCredentials: a URL's token or password is never printed
// back by validation, whatever else is wrong with the endpoint.
func TestValidateNoCredentials(t *testing.T) {
	for _, d := range []Destination{
		{Endpoints: []Endpoint{{URL: "https://user:SENTINEL@hooks.example/in"}}},
		{Endpoints: []Endpoint{{URL: "https://user:SENTINEL/in"}}},
		{Endpoints: []Endpoint{{URL: "ftp://hooks.example/in?token=SENTINEL"}}},
		{Endpoints: []Endpoint{{URL: "https://hooks.example/in?token=SENTINEL", Headers: map[string]string{"Host": "x"}}}},
		{Endpoints: []Endpoint{{URL: "https://hooks.example/in?token=SENTINEL", Signing: "nope"}}},
	} {
		err := d.Validate()
		if err == nil {
			t.Fatalf("%+v: valid", d)
		}
		if strings.Contains(err.Error(), "SENTINEL") {
			t.Errorf("error shows the credential: %v", err)
		}
	}
}

func TestValidateDisplayUnique(t *testing.T) {
	d := Destination{Endpoints: []Endpoint{{URL: "https://h.example/in?token=A"}, {URL: "https://h.example/in?token=B"}}}
	err := d.Validate()
	if err == nil || !strings.Contains(err.Error(), `endpoints[1] (https://h.example/in?token=****): shown as "https://h.example/in?token=****" like endpoints[0]`) {
		t.Fatalf("err = %v", err)
	}
	d.Endpoints[1].Name = "second"
	if err := d.Validate(); err != nil {
		t.Fatalf("named: %v", err)
	}
	d.Endpoints[0].Name = "x\x1b"
	if err := d.Validate(); err == nil || !strings.Contains(err.Error(), "name") {
		t.Fatalf("control character in name: %v", err)
	}
}

// TestAttemptURLRedacted: the sender posts to the URL itself and records
// the attempt under its display.
func TestAttemptURLRedacted(t *testing.T) {
	var got string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { got = r.URL.RawQuery }))
	defer srv.Close()
	s, err := NewSender(Options{})
	if err != nil {
		t.Fatal(err)
	}
	d := &Destination{Endpoints: []Endpoint{{URL: srv.URL + "/in?token=SENTINEL"}}}
	res := s.Deliver(context.Background(), d, []byte(`{}`))
	if got != "token=SENTINEL" {
		t.Errorf("query sent = %q", got)
	}
	if len(res.Attempts) != 1 || res.Attempts[0].URL != srv.URL+"/in?token=****" {
		t.Errorf("attempts = %+v", res.Attempts)
	}
}
