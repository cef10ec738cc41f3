package admin

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/evfwd/evfwd/pkg/store"
)

// MaxResendIDs bounds the ids of one resend request.
const MaxResendIDs = 1000

// DefaultResendLimit is how many deliveries a resend by status, source
// or since sends again when it gives no limit, and MaxResendLimit the
// most it may ask for: each resend is one transaction, which on SQLite
// holds the store's one writer, ingest included, while it runs.
const (
	DefaultResendLimit = 10_000
	MaxResendLimit     = 100_000
)

// Resendable are the statuses a resend sends again: every finished one
// but cancelled (a deletion request withdrew its message), as Svix and
// Stripe resend delivered and failed events alike.
func Resendable() []store.Status { return []store.Status{store.Delivered, store.Failed, store.Dead} }

// ResendRequest is the body of POST /admin/v1/deliveries/resend and of
// the page's POST /api/resend: IDs, or every finished delivery that Status,
// Source and Since select (at least one of them, so that an empty body
// resends nothing rather than everything).
type ResendRequest struct {
	IDs    []int64      `json:"ids,omitempty"`
	Status store.Status `json:"status,omitempty"`
	Source string       `json:"source,omitempty"`
	// Since selects the deliveries created at or after it (RFC 3339).
	Since time.Time `json:"since,omitzero"`
	// Limit is the most of those it resends (DefaultResendLimit when
	// 0, at most MaxResendLimit), finished longest ago first; the answer
	// says how many more match (ResentView.Skipped).
	Limit int `json:"limit,omitempty"`
}

// Check says what is wrong with r, naming the field.
func (r ResendRequest) Check() error {
	byFilter := r.Status != "" || r.Source != "" || !r.Since.IsZero()
	switch {
	case len(r.IDs) == 0 && !byFilter:
		return fmt.Errorf(`give "ids", or "status" (%s), "source" and/or "since" to resend every finished delivery they select`, quoted(Resendable()))
	case len(r.IDs) > 0 && byFilter:
		return fmt.Errorf(`"ids" or "status"/"source"/"since", not both`)
	case len(r.IDs) > MaxResendIDs:
		return fmt.Errorf(`"ids": %d, at most %d at a time`, len(r.IDs), MaxResendIDs)
	case r.Status != "" && !slices.Contains(Resendable(), r.Status):
		return fmt.Errorf(`"status" %q: only %s deliveries are resent`, r.Status, quoted(Resendable()))
	case r.Limit != 0 && len(r.IDs) > 0:
		return fmt.Errorf(`"limit" goes with "status"/"source"/"since"; "ids" are at most %d already`, MaxResendIDs)
	case r.Limit < 0 || r.Limit > MaxResendLimit:
		return fmt.Errorf(`"limit" %d: want 1 to %d (default %d)`, r.Limit, MaxResendLimit, DefaultResendLimit)
	}
	for _, id := range r.IDs {
		if id <= 0 {
			return fmt.Errorf(`"ids": delivery id %d: want a positive number`, id)
		}
	}
	return nil
}

// Filter is the store.Filter of a request by status, source and since,
// with its limit (DefaultResendLimit when it gives none).
func (r ResendRequest) Filter() store.Filter {
	f := store.Filter{Status: r.Status, Source: r.Source, Since: r.Since, Limit: r.Limit}
	if f.Limit == 0 {
		f.Limit = DefaultResendLimit
	}
	return f
}

func quoted(ss []store.Status) string {
	out := ""
	for i, s := range ss {
		switch {
		case i == len(ss)-1 && i > 0:
			out += " or "
		case i > 0:
			out += ", "
		}
		out += `"` + string(s) + `"`
	}
	return out
}

// ResentView is what a resend answers, and what `evfwd deliveries resend
// -o json` prints: how many deliveries were made pending, the ids given
// that were not, by why, and, by status, source or since, how many more
// match than the limit let it resend (store.Resent). The lists are never
// null.
type ResentView struct {
	Resent  int     `json:"resent"`
	Pending []int64 `json:"pending"`
	Purged  []int64 `json:"purged"`
	Unknown []int64 `json:"unknown"`
	Skipped int     `json:"skipped"`
}

// ViewResent is r as a ResentView.
func ViewResent(r store.Resent) ResentView {
	orEmpty := func(ids []int64) []int64 {
		if ids == nil {
			return []int64{}
		}
		return ids
	}
	return ResentView{Resent: r.N, Pending: orEmpty(r.Pending), Purged: orEmpty(r.Purged), Unknown: orEmpty(r.Unknown), Skipped: r.Skipped}
}

// resend sends finished deliveries again (store.Store.Resend) and wakes
// the forwarder of each source it may have touched.
func (a *Handler) resend(w http.ResponseWriter, r *http.Request) {
	var req ResendRequest
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 64<<10))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		writeError(w, http.StatusBadRequest, "invalid request body: "+err.Error())
		return
	}
	if err := req.Check(); err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	res, err := a.cfg.Store.Resend(r.Context(), req.IDs, req.Filter(), a.cfg.Now())
	if err != nil {
		a.storeError(w, "resend", err)
		return
	}
	a.cfg.Logger.Info("resend", "ids", len(req.IDs), "status", req.Status, "source", req.Source, "since", req.Since, "resent", res.N, "skipped", res.Skipped)
	if res.N > 0 {
		for _, s := range a.cfg.Sources {
			if s.Webhooks && (req.Source == "" || req.Source == s.Name) {
				a.cfg.Queued(s.Name, 0)
			}
		}
	}
	writeJSON(w, http.StatusOK, ViewResent(res))
}
