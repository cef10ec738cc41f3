package admin_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/evfwd/evfwd/pkg/admin"
	"github.com/evfwd/evfwd/pkg/store"
	"github.com/evfwd/evfwd/pkg/store/storetest"
	"github.com/google/go-cmp/cmp"
)

// TestResend: POST /admin/v1/deliveries/resend makes a delivered
// delivery pending and due now, reports what it left alone, wakes the
// forwarder of the sources it may have touched, and refuses a request
// that selects nothing or everything by mistake.
func TestResend(t *testing.T) {
	a, _ := newAPI(t, token)
	ctx := context.Background()
	if err := a.store.Ingest(ctx, []store.Message{storetest.Msg("web", "m1", 0, true), storetest.Msg("web", "m2", 0, true)}); err != nil {
		t.Fatal(err)
	}
	ds, err := a.store.Lease(ctx, store.LeaseRequest{Owner: "o", Source: "web", Limit: 1, Now: t0, TTL: time.Minute})
	if err != nil || len(ds) != 1 {
		t.Fatalf("Lease: %v, %d", err, len(ds))
	}
	if err := a.store.Complete(ctx, []store.Completion{{ID: ds[0].ID, Owner: "o", Status: store.Delivered, Attempts: 1, FirstAttempt: t0}}); err != nil {
		t.Fatal(err)
	}
	a.heard()
	code, body := a.post(t, "/admin/v1/deliveries/resend", fmt.Sprintf(`{"ids":[%d,2,99]}`, ds[0].ID))
	var got admin.ResentView
	if code != 200 || json.Unmarshal([]byte(body), &got) != nil {
		t.Fatalf("resend: %d %s", code, body)
	}
	if diff := cmp.Diff(admin.ResentView{Resent: 1, Pending: []int64{2}, Purged: []int64{}, Unknown: []int64{99}}, got); diff != "" {
		t.Errorf("resend answer mismatch (-want +got):\n%s", diff)
	}
	d, err := a.store.Get(ctx, ds[0].ID)
	if err != nil || d.Status != store.Pending || !d.NextAttempt.Equal(t0) {
		t.Errorf("resent delivery: %+v, %v; want pending, due %s", d, err, t0)
	}
	if diff := cmp.Diff([]string{"app:", "web:"}, a.heard()); diff != "" {
		t.Errorf("woken sources mismatch (-want +got):\n%s", diff)
	}
	for _, tt := range []struct{ body, want string }{
		{`{}`, `give "ids", or "status"`},
		{`{"ids":[1],"source":"web"}`, `not both`},
		{`{"status":"pending"}`, `only "delivered", "failed" or "dead"`},
		{`{"status":"cancelled"}`, `only "delivered", "failed" or "dead"`},
		{`{"ids":[0]}`, `positive`},
		{`{"id":[1]}`, `unknown field`},
		{`{"status":"failed","limit":-1}`, `"limit" -1: want 1 to 100000 (default 10000)`},
		{`{"status":"failed","limit":100001}`, `"limit" 100001: want 1 to 100000`},
		{`{"ids":[1],"limit":5}`, `"limit" goes with "status"/"source"/"since"`},
	} {
		code, body := a.post(t, "/admin/v1/deliveries/resend", tt.body)
		var e struct{ Error string }
		json.Unmarshal([]byte(body), &e)
		if code != 400 || !strings.Contains(e.Error, tt.want) {
			t.Errorf("%s: %d %s; want 400 saying %q", tt.body, code, body, tt.want)
		}
	}
	// By filter: the one delivered is pending again already, so nothing.
	for _, f := range []string{`{"status":"delivered","source":"web"}`, `{"since":"2024-01-01T00:00:00Z"}`} {
		if code, body := a.post(t, "/admin/v1/deliveries/resend", f); code != 200 ||
			body != `{"resent":0,"pending":[],"purged":[],"unknown":[],"skipped":0}`+"\n" {
			t.Errorf("resend by filter %s: %d %s", f, code, body)
		}
	}
	if code, body := a.post(t, "/admin/v1/deliveries/resend", `{"since":"yesterday"}`); code != 400 {
		t.Errorf("resend since yesterday: %d %s, want 400", code, body)
	}
}

// TestResendLimit: by status, a resend sends at most "limit" (10,000 when
// none is given) and says how many more match.
func TestResendLimit(t *testing.T) {
	a, _ := newAPI(t, token)
	ctx := context.Background()
	if err := a.store.Ingest(ctx, []store.Message{storetest.Msg("web", "m1", 0, true), storetest.Msg("web", "m2", 0, true), storetest.Msg("web", "m3", 0, true)}); err != nil {
		t.Fatal(err)
	}
	ds, err := a.store.Lease(ctx, store.LeaseRequest{Owner: "o", Source: "web", Limit: 3, Now: t0, TTL: time.Minute})
	if err != nil || len(ds) != 3 {
		t.Fatalf("Lease: %v, %d", err, len(ds))
	}
	var cs []store.Completion
	for _, d := range ds {
		cs = append(cs, store.Completion{ID: d.ID, Owner: "o", Status: store.Failed, Attempts: 1, FirstAttempt: t0})
	}
	if err := a.store.Complete(ctx, cs); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct{ body, want string }{
		{`{"status":"failed","limit":2}`, `{"resent":2,"pending":[],"purged":[],"unknown":[],"skipped":1}`},
		{`{"status":"failed"}`, `{"resent":1,"pending":[],"purged":[],"unknown":[],"skipped":0}`},
	} {
		if code, body := a.post(t, "/admin/v1/deliveries/resend", tt.body); code != 200 || body != tt.want+"\n" {
			t.Errorf("resend %s: %d %s, want 200 %s", tt.body, code, body, tt.want)
		}
	}
	if f := (admin.ResendRequest{Status: store.Failed}).Filter(); f.Limit != admin.DefaultResendLimit {
		t.Errorf("Filter() without a limit: %+v, want Limit %d", f, admin.DefaultResendLimit)
	}
}
