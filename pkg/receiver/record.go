package receiver

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"iter"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/evfwd/evfwd/pkg/message"
	"github.com/evfwd/evfwd/pkg/rawjson"
)

// Record is one line of a --record file (and of `listen -o json`), as
// read back. The body's exact bytes survive: "body" holds them verbatim
// when they are single-line JSON; otherwise "body" holds a readable form
// and "bodyRaw" (UTF-8 text) or "bodyBase64" (anything else) the bytes.
// Keys are camelCase like every evfwd JSON output; files written before
// that, with snake_case keys, are still read (see legacyRecord).
type Record struct {
	ReceivedAt time.Time         `json:"receivedAt"`
	Method     string            `json:"method"`
	Path       string            `json:"path"`
	Query      string            `json:"query,omitempty"`
	Headers    map[string]string `json:"headers"`
	Size       int               `json:"size"`
	Type       string            `json:"type,omitempty"`
	Event      string            `json:"event,omitempty"`
	UserID     string            `json:"userId,omitempty"`
	MessageID  string            `json:"messageId,omitempty"`
	Signature  Signature         `json:"signature"`
	Shape      Shape             `json:"shape"`
	Duplicate  bool              `json:"duplicate"`
	Replay     bool              `json:"replay"`
	Refused    string            `json:"refused,omitempty"`
	Status     int               `json:"status"`
	LatencyMS  float64           `json:"latencyMs"`
	Forward    *ForwardRecord    `json:"forward,omitempty"`
	Body       json.RawMessage   `json:"body"`
	BodyRaw    *string           `json:"bodyRaw,omitempty"`
	BodyBase64 []byte            `json:"bodyBase64,omitempty"`

	// Line is the 1-based line number in the file read (not stored).
	Line int `json:"-"`
}

// ForwardRecord is the stored form of Forwarded.
type ForwardRecord struct {
	URL       string          `json:"url"`
	Status    int             `json:"status,omitempty"`
	LatencyMS float64         `json:"latencyMs"`
	Error     string          `json:"error,omitempty"`
	Body      json.RawMessage `json:"body,omitempty"`
}

// RawBody returns the exact body bytes the request carried.
func (r *Record) RawBody() []byte {
	switch {
	case r.BodyBase64 != nil:
		return r.BodyBase64
	case r.BodyRaw != nil:
		return []byte(*r.BodyRaw)
	}
	return r.Body
}

// Header returns the recorded header value for key (canonical form, e.g.
// "X-Signature"), "" when absent.
func (r *Record) Header(key string) string {
	return r.Headers[http.CanonicalHeaderKey(key)]
}

// LineError is a line of a record file that could not be read.
type LineError struct {
	Line int
	Err  error
}

func (e *LineError) Error() string { return fmt.Sprintf("line %d: %v", e.Line, e.Err) }
func (e *LineError) Unwrap() error { return e.Err }

// MaxRecordLine bounds one record line when reading: the longest line a
// Handler writes for a body within DefaultMaxBodyBytes. A body byte takes
// up to 12 (a control character escaped as \u00XX in "body" and again in
// "bodyRaw"), a byte of the app's answer up to 6, and the request line
// and headers (1 MB under net/http's default limit) up to 6 each.
const MaxRecordLine = 12*DefaultMaxBodyBytes + 6*maxForwardBody + 6*http.DefaultMaxHeaderBytes + 64<<10

// EndTornLine ends the last line of a record file opened for appending
// when a run that died mid-write (killed, disk full) left it unfinished,
// so that the next record starts a line of its own: the torn line stays
// one unreadable line (a *LineError for ReadRecords) and no more.
func EndTornLine(f *os.File) error {
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() || fi.Size() == 0 {
		return err
	}
	// f may be open for writing only: read through a file of our own.
	r, err := os.Open(f.Name())
	if err != nil {
		return err
	}
	defer r.Close()
	var last [1]byte
	if _, err := r.ReadAt(last[:], fi.Size()-1); err != nil || last[0] == '\n' {
		return err
	}
	_, err = f.Write([]byte{'\n'})
	return err
}

// ReadRecords yields the records of an NDJSON record file in order. A line
// that is not a record yields a *LineError and reading goes on; blank
// lines are skipped; a read error ends the sequence with that error.
func ReadRecords(r io.Reader) iter.Seq2[*Record, error] {
	return func(yield func(*Record, error) bool) {
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 0, 64<<10), MaxRecordLine)
		n := 0
		for sc.Scan() {
			n++
			line := bytes.TrimSpace(sc.Bytes())
			if len(line) == 0 {
				continue
			}
			rec := &Record{}
			if err := json.Unmarshal(line, rec); err != nil {
				if !yield(nil, &LineError{Line: n, Err: err}) {
					return
				}
				continue
			}
			if bytes.Contains(line, legacyMark) {
				readLegacy(line, rec)
			}
			if rec.Method == "" {
				if !yield(nil, &LineError{Line: n, Err: fmt.Errorf("not a request record")}) {
					return
				}
				continue
			}
			rec.Line = n
			if !yield(rec, nil) {
				return
			}
		}
		if err := sc.Err(); err != nil {
			yield(nil, &LineError{Line: n + 1, Err: err})
		}
	}
}

// legacyRecord holds the keys an evfwd before camelCase output wrote, so
// that record files made then still verify.
type legacyRecord struct {
	ReceivedAt *time.Time `json:"received_at"`
	UserID     string     `json:"user_id"`
	MessageID  string     `json:"message_id"`
	LatencyMS  *float64   `json:"latency_ms"`
	BodyRaw    *string    `json:"body_raw"`
	BodyBase64 []byte     `json:"body_base64"`
	Forward    *struct {
		LatencyMS *float64 `json:"latency_ms"`
	} `json:"forward"`
}

// legacyMark is in every line an older evfwd wrote (received_at is never
// omitted), so lines in the current form skip the second decode.
var legacyMark = []byte(`"received_at"`)

// readLegacy fills rec from line's snake_case keys.
func readLegacy(line []byte, rec *Record) {
	var old legacyRecord
	if json.Unmarshal(line, &old) != nil {
		return
	}
	if old.ReceivedAt != nil {
		rec.ReceivedAt = *old.ReceivedAt
	}
	if old.UserID != "" {
		rec.UserID = old.UserID
	}
	if old.MessageID != "" {
		rec.MessageID = old.MessageID
	}
	if old.LatencyMS != nil {
		rec.LatencyMS = *old.LatencyMS
	}
	if old.BodyRaw != nil {
		rec.BodyRaw = old.BodyRaw
	}
	if old.BodyBase64 != nil {
		rec.BodyBase64 = old.BodyBase64
	}
	if old.Forward != nil && old.Forward.LatencyMS != nil && rec.Forward != nil {
		rec.Forward.LatencyMS = *old.Forward.LatencyMS
	}
}

// AppendJSON appends the request as one record line ending in '\n'. It is
// written by hand: it runs for every request, and encoding/json would
// re-validate and re-compact the body it already checked.
func (r *Request) AppendJSON(b []byte) []byte {
	b = append(b, `{"receivedAt":"`...)
	b = message.AppendTime(b, r.ReceivedAt)
	b = append(b, `","method":`...)
	b = rawjson.AppendString(b, r.Method)
	b = append(b, `,"path":`...)
	b = rawjson.AppendString(b, r.Path)
	if r.Query != "" {
		b = append(b, `,"query":`...)
		b = rawjson.AppendString(b, r.Query)
	}
	b = append(b, `,"headers":`...)
	b = appendHeaders(b, r.Header)
	b = append(b, `,"size":`...)
	b = strconv.AppendInt(b, int64(r.Size), 10)
	b = appendOptString(b, "type", r.Type)
	b = appendOptString(b, "event", r.Event)
	b = appendOptString(b, "userId", r.UserID)
	b = appendOptString(b, "messageId", r.MessageID)
	b = append(b, `,"signature":{"verdict":"`...)
	b = append(b, r.Signature.Verdict...)
	b = append(b, '"')
	b = appendOptString(b, "scheme", string(r.Signature.Scheme))
	b = appendOptString(b, "reason", string(r.Signature.Reason))
	if r.Signature.Secret > 0 {
		b = append(b, `,"secret":`...)
		b = strconv.AppendInt(b, int64(r.Signature.Secret), 10)
	}
	b = appendOptString(b, "message", r.Signature.Message)
	b = append(b, `},"shape":{"ok":`...)
	b = strconv.AppendBool(b, r.Shape.OK)
	b = appendOptString(b, "reason", r.Shape.Reason)
	b = append(b, `},"duplicate":`...)
	b = strconv.AppendBool(b, r.Duplicate)
	b = append(b, `,"replay":`...)
	b = strconv.AppendBool(b, r.Replay)
	b = appendOptString(b, "refused", r.Refused)
	b = append(b, `,"status":`...)
	b = strconv.AppendInt(b, int64(r.Status), 10)
	b = append(b, `,"latencyMs":`...)
	b = appendMillis(b, r.Latency)
	if f := r.Forward; f != nil {
		b = append(b, `,"forward":{"url":`...)
		b = rawjson.AppendString(b, f.URL)
		if f.Status != 0 {
			b = append(b, `,"status":`...)
			b = strconv.AppendInt(b, int64(f.Status), 10)
		}
		b = append(b, `,"latencyMs":`...)
		b = appendMillis(b, f.Latency)
		b = appendOptString(b, "error", f.Error)
		if len(f.Body) > 0 {
			b = append(b, `,"body":`...)
			b, _ = appendBody(b, f.Body, jsonUnknown)
		}
		b = append(b, '}')
	}
	b = append(b, `,"body":`...)
	b, exact := appendBody(b, r.Body, r.bodyJSON)
	if !exact {
		if utf8.Valid(r.Body) {
			b = append(b, `,"bodyRaw":`...)
			b = rawjson.AppendString(b, string(r.Body))
		} else {
			b = append(b, `,"bodyBase64":"`...)
			b = base64.StdEncoding.AppendEncode(b, r.Body)
			b = append(b, '"')
		}
	}
	return append(b, "}\n"...)
}

// appendBody appends body as JSON when it parses, else as a string, and
// reports whether what it wrote is the exact bytes.
func appendBody(b, body []byte, known jsonState) ([]byte, bool) {
	if len(body) > 0 && (known == jsonYes || known == jsonUnknown && json.Valid(body)) {
		// A decoder hands back a value's bytes verbatim, inner spaces
		// included, but not spaces around it nor a line break (that
		// would split the record).
		if !isSpace(body[0]) && !isSpace(body[len(body)-1]) &&
			bytes.IndexByte(body, '\n') < 0 && bytes.IndexByte(body, '\r') < 0 {
			return append(b, body...), true
		}
		var c bytes.Buffer
		json.Compact(&c, body)
		return append(b, c.Bytes()...), false
	}
	return rawjson.AppendString(b, strings.ToValidUTF8(string(body), "\uFFFD")), false
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

func appendOptString(b []byte, key, v string) []byte {
	if v == "" {
		return b
	}
	b = append(b, ',', '"')
	b = append(b, key...)
	b = append(b, '"', ':')
	return rawjson.AppendString(b, v)
}

func appendMillis(b []byte, d time.Duration) []byte {
	return strconv.AppendFloat(b, float64(d)/float64(time.Millisecond), 'f', 3, 64)
}

// appendHeaders writes headers as an object of strings in key order;
// repeated values are joined with ", " as HTTP allows.
func appendHeaders(b []byte, h http.Header) []byte {
	var small [16]string
	keys := small[:0]
	for k := range h {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	b = append(b, '{')
	for i, k := range keys {
		if i > 0 {
			b = append(b, ',')
		}
		b = rawjson.AppendString(b, k)
		b = append(b, ':')
		if v := h[k]; len(v) == 1 {
			b = rawjson.AppendString(b, v[0])
		} else {
			b = rawjson.AppendString(b, strings.Join(v, ", "))
		}
	}
	return append(b, '}')
}
