package webhook

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/evfwd/evfwd/internal/webhooktest"
	"github.com/evfwd/evfwd/pkg/signature"
	"github.com/google/go-cmp/cmp"
)

// TestPreviewIsWhatIsSent: for each scheme, the headers Preview gives an
// endpoint are those its attempt carries, signatures included, when the
// attempt starts at the time previewed.
func TestPreviewIsWhatIsSent(t *testing.T) {
	at := time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name string
		edit func(d *Destination)
	}{
		{"unsigned", func(d *Destination) {}},
		{"x-signature", func(d *Destination) { d.SharedSecret = "s3cret" }},
		{"stripe rotation", func(d *Destination) {
			d.Scheme, d.SharedSecret, d.ExtraSecrets = signature.Stripe, "whsec_new", []string{"whsec_old"}
		}},
		{"standard beside x-signature", func(d *Destination) {
			d.SharedSecret = "s3cret"
			d.Endpoints[1].Signing, d.Endpoints[1].SigningSecret = SigningStandard, standardSecret
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			first, second := newHook(t, status(500)), newHook(t, status(200))
			d := dest(first.URL, second.URL)
			d.Method = http.MethodPut
			d.Endpoints[0].Headers = map[string]string{"x-env": "prod"}
			tc.edit(d)
			s := newSender(t, Options{UserAgent: UserAgent("1.2.3"), Now: func() time.Time { return at }})
			want, err := s.Preview(d, []byte(testBody), "m_1", at)
			if err != nil {
				t.Fatal(err)
			}
			if res := s.DeliverMessage(context.Background(), d, []byte(testBody), "m_1", nil); !res.Delivered() {
				t.Fatalf("not delivered: %+v", res)
			}
			for i, h := range []*webhooktest.Receiver{first, second} {
				got := h.Requests()[0].Header
				for _, hop := range []string{"Content-Length", "Accept-Encoding"} {
					got.Del(hop) // the transport's, not the sender's
				}
				if diff := cmp.Diff(want[i].Header, got); diff != "" {
					t.Errorf("endpoint %d: mismatch (-want +got):\n%s", i, diff)
				}
				if want[i].Method != http.MethodPut || want[i].URL != d.Endpoints[i].URL {
					t.Errorf("endpoint %d: %s %s", i, want[i].Method, want[i].URL)
				}
			}
		})
	}
}
