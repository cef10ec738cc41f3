package serve_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/evfwd/evfwd/internal/webhooktest"
	"github.com/evfwd/evfwd/pkg/serve"
	"github.com/evfwd/evfwd/pkg/store"
	"github.com/evfwd/evfwd/pkg/webhook"
)

// Link-local and metadata endpoints are refused at start, each named with
// its source and the setting that allows it; loopback and private
// addresses are not.
func TestConfigRefusesLinkLocalEndpoints(t *testing.T) {
	t.Parallel()
	eps := func(urls ...string) serve.Webhooks {
		w := serve.Webhooks{Enabled: true}
		for _, u := range urls {
			w.Endpoints = append(w.Endpoints, webhook.Endpoint{URL: u})
		}
		return w
	}
	cfg := serve.Config{Sources: []serve.Source{
		{Name: "web", WriteKey: "k1", Webhooks: eps("http://127.0.0.1:8788/", "http://169.254.169.254/latest/meta-data/", "http://10.0.0.5/hook")},
		{Name: "app", WriteKey: "k2", Webhooks: eps("https://metadata.google.internal/computeMetadata/v1/", "http://[fe80::1%25eth0]:8080/")},
		{Name: "off", WriteKey: "k3", Webhooks: serve.Webhooks{Destination: eps("http://169.254.169.254/").Destination}}, // webhooks disabled
		{Name: "lan", WriteKey: "k4", Webhooks: eps("http://192.168.1.20:9000/hook", "http://localhost:8788/")},
	}}
	err := cfg.Validate()
	want := []string{
		`source "web": webhooks: endpoints[1] (http://169.254.169.254/latest/meta-data/): 169.254.169.254 is link-local (169.254.0.0/16, where cloud metadata services answer): refused unless allow_private_endpoints is true`,
		`source "app": webhooks: endpoints[0] (https://metadata.google.internal/computeMetadata/v1/): metadata.google.internal is Google Cloud's metadata server: refused unless allow_private_endpoints is true`,
		`source "app": webhooks: endpoints[1] (http://[fe80::1%eth0]:8080/): fe80::1%eth0 is link-local (fe80::/10): refused unless allow_private_endpoints is true`,
	}
	if err == nil || err.Error() != strings.Join(want, "\n") {
		t.Errorf("Validate:\n%v\nwant\n%s", err, strings.Join(want, "\n"))
	}
	if !errors.Is(err, webhook.ErrBlockedAddress) {
		t.Errorf("Validate: %v, want ErrBlockedAddress", err)
	}
	// New refuses it too, before opening the store.
	cfg.Store = "sqlite://" + filepath.Join(t.TempDir(), "evfwd.db")
	if _, err := serve.New(context.Background(), cfg, serve.Options{}); !errors.Is(err, webhook.ErrBlockedAddress) {
		t.Errorf("New: %v, want ErrBlockedAddress", err)
	}
	cfg.AllowPrivateEndpoints = true
	if err := cfg.Validate(); err != nil {
		t.Errorf("Validate with allow_private_endpoints: %v", err)
	}
}

// With allow_private_endpoints the sender calls a link-local endpoint
// (fe80::1 on the loopback interface: nothing answers, nothing leaves the
// machine): its attempt fails as any unreachable one does, and the next
// endpoint takes the message.
func TestAllowPrivateEndpointsReachesSender(t *testing.T) {
	t.Parallel()
	rcv := newHook(t)
	cfg := serve.Config{
		Addr:                  "127.0.0.1:0",
		Store:                 "sqlite://" + filepath.Join(t.TempDir(), "evfwd.db"),
		AllowPrivateEndpoints: true,
		Sources: []serve.Source{{Name: "web", WriteKey: "wk_web", Webhooks: serve.Webhooks{Enabled: true,
			Destination: webhook.Destination{Endpoints: []webhook.Endpoint{{URL: "http://[fe80::1%25lo]:1/hook"}, {URL: rcv.URL}}}}}},
	}
	h := run(t, cfg, serve.Options{Now: webhooktest.NewClock(t0).Now})
	if code, body := h.post(t, "/v1/track", "wk_web", `{"userId":"u1","event":"E"}`); code != 200 {
		t.Fatalf("track: %d %s", code, body)
	}
	waitFor(t, "delivered", func() bool { return len(deliveries(t, h, store.Filter{Status: store.Delivered})) == 1 })
	d, err := h.srv.Store().Get(context.Background(), deliveries(t, h, store.Filter{})[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Records) != 2 || d.Records[0].Class == string(webhook.ClassBlocked) || d.Records[1].Class != string(webhook.ClassOK) {
		t.Errorf("attempts %+v, want the link-local one made (not %s), then the hook's 2xx", d.Records, webhook.ClassBlocked)
	}
}
