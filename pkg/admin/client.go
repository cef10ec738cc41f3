package admin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/evfwd/evfwd/pkg/store"
)

// Client calls the admin API of a running serve (the admin commands are
// thin layers over it).
type Client struct {
	Endpoint   string // base URL of the service, e.g. http://127.0.0.1:8787
	Token      string
	UserAgent  string
	HTTPClient *http.Client // default http.DefaultClient
}

// Error is an answer other than 2xx; Message is the API's "error". The
// Client does not retry any of them: a 429 (RateLimited) says how long to
// wait, and another request before then is refused again.
type Error struct {
	Status  int
	Message string
	// RetryAfter is a 429's Retry-After (0 when it has none).
	RetryAfter time.Duration
}

func (e *Error) Error() string {
	if e.RateLimited() && e.Message != "" {
		return e.Message // "too many wrong admin tokens from this address: try again in 4s"
	}
	return fmt.Sprintf("%d %s: %s", e.Status, http.StatusText(e.Status), e.Message)
}

// RateLimited reports whether the server refused the request (429)
// because this address sent too many wrong admin tokens; RetryAfter says
// for how much longer.
func (e *Error) RateLimited() bool { return e.Status == http.StatusTooManyRequests }

// Auth reports whether the token was missing or refused (401, 403).
func (e *Error) Auth() bool {
	return e.Status == http.StatusUnauthorized || e.Status == http.StatusForbidden
}

// CreateDeletion creates a deletion request for userID in sources (all
// when empty).
func (c *Client) CreateDeletion(ctx context.Context, userID string, sources []string) (*Deletion, error) {
	body, _ := json.Marshal(DeletionRequest{UserID: userID, Sources: sources})
	var d Deletion
	return &d, c.do(ctx, http.MethodPost, "/admin/v1/deletions", "application/json", bytes.NewReader(body), &d)
}

// Deletion returns a deletion request.
func (c *Client) Deletion(ctx context.Context, id string) (*Deletion, error) {
	var d Deletion
	return &d, c.do(ctx, http.MethodGet, "/admin/v1/deletions/"+url.PathEscape(id), "", nil, &d)
}

// Sync sends the full list of an audience or computed trait (kind),
// streamed from list (NDJSON; audience.AppendLine makes it of a file's
// lines), to the webhook destinations of sources (all with webhooks
// enabled when empty). A kind other than store.KindAudience and
// store.KindTrait is an error, and nothing is sent.
func (c *Client) Sync(ctx context.Context, kind store.SyncKind, name string, sources []string, list io.Reader) (*SyncReport, error) {
	var path string
	switch kind {
	case store.KindAudience:
		path = "/admin/v1/audiences/"
	case store.KindTrait:
		path = "/admin/v1/traits/"
	default:
		return nil, fmt.Errorf("admin: unknown sync kind %q: want %q or %q", kind, store.KindAudience, store.KindTrait)
	}
	path += url.PathEscape(name) + "/sync"
	if len(sources) > 0 {
		path += "?" + url.Values{"source": sources}.Encode()
	}
	var rep SyncReport
	return &rep, c.do(ctx, http.MethodPost, path, "application/x-ndjson", list, &rep)
}

// Destinations lists the destinations of every source, as the node that
// answers runs them.
func (c *Client) Destinations(ctx context.Context) ([]Destination, error) {
	var out struct {
		Destinations []Destination `json:"destinations"`
	}
	return out.Destinations, c.do(ctx, http.MethodGet, "/admin/v1/destinations", "", nil, &out)
}

// Pause stops sending the deliveries of source's destination name on the
// node that answers; they are kept until Resume. An unknown destination
// is an *Error with Status 404.
func (c *Client) Pause(ctx context.Context, source, name string) (*Destination, error) {
	return c.pauseResume(ctx, source, name, "pause")
}

// Resume sends a paused destination's deliveries again.
func (c *Client) Resume(ctx context.Context, source, name string) (*Destination, error) {
	return c.pauseResume(ctx, source, name, "resume")
}

func (c *Client) pauseResume(ctx context.Context, source, name, verb string) (*Destination, error) {
	var d Destination
	path := "/admin/v1/destinations/" + url.PathEscape(source) + "/" + url.PathEscape(name) + "/" + verb
	return &d, c.do(ctx, http.MethodPost, path, "", nil, &d)
}

// Reload has the service read its configuration again and apply what it
// says of the destinations. A configuration it refuses is an *Error with
// Status 422, and the running one is kept.
func (c *Client) Reload(ctx context.Context) (*Reloaded, error) {
	var r Reloaded
	return &r, c.do(ctx, http.MethodPost, "/admin/v1/reload", "", nil, &r)
}

func (c *Client) do(ctx context.Context, method, path, ctype string, body io.Reader, out any) error {
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimRight(c.Endpoint, "/")+path, body)
	if err != nil {
		return err
	}
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	if c.UserAgent != "" {
		req.Header.Set("User-Agent", c.UserAgent)
	}
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	hc := c.HTTPClient
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode/100 != 2 {
		var e struct {
			Error string `json:"error"`
		}
		if json.Unmarshal(data, &e) != nil || e.Error == "" {
			e.Error = strings.TrimSpace(string(data))
			if len(e.Error) > 200 {
				e.Error = e.Error[:200] + "..."
			}
		}
		ae := &Error{Status: resp.StatusCode, Message: e.Error}
		if ae.RateLimited() {
			if secs, err := strconv.ParseInt(resp.Header.Get("Retry-After"), 10, 64); err == nil && secs > 0 {
				ae.RetryAfter = time.Duration(min(secs, 1<<30)) * time.Second
			}
		}
		return ae
	}
	if err := json.Unmarshal(data, out); err != nil {
		return errors.New("unexpected answer from " + req.URL.Host + ": " + err.Error())
	}
	return nil
}
