// Package capture reads an HTTP request as it was captured on the wire
// (request line, headers, blank line, body), the way a developer saves one
// from a proxy, tcpdump or `evfwd listen --verbose`, so its body can be
// checked byte for byte.
package capture

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net/textproto"
	"strconv"
	"strings"
)

// Request is a captured request. Body streams the body: exactly
// Content-Length bytes when the header is present, else the rest of the
// input.
type Request struct {
	Method, Target, Proto string
	Header                textproto.MIMEHeader
	// ContentLength is -1 when the header is absent.
	ContentLength int64
	Body          io.Reader
}

// MaxHeaderBytes bounds the request line and headers of a capture.
const MaxHeaderBytes = 1 << 20

// ErrShortBody is returned by reads of Body when the capture ends before
// Content-Length bytes.
var ErrShortBody = errors.New("body is shorter than its Content-Length")

// Parse reads the request line and headers from r; accepts CRLF or LF line
// ends. The body is left in r, read through Request.Body.
func Parse(r io.Reader) (*Request, error) {
	br := bufio.NewReader(r)
	tp := textproto.NewReader(bufio.NewReader(&limitedLines{r: br, n: MaxHeaderBytes}))
	// textproto needs its own bufio; feed it byte by byte through br so it
	// never reads past the blank line into the body.
	line, err := tp.ReadLine()
	if err != nil {
		if err == io.EOF {
			return nil, errors.New("empty request file")
		}
		return nil, fmt.Errorf("request line: %w", err)
	}
	method, rest, ok1 := strings.Cut(line, " ")
	target, proto, ok2 := strings.Cut(rest, " ")
	if !ok1 || !ok2 || method == "" || target == "" || !strings.HasPrefix(proto, "HTTP/") {
		return nil, fmt.Errorf("line 1: not an HTTP request line: %q", truncate(line, 80))
	}
	hdr, err := tp.ReadMIMEHeader()
	if err != nil && !(err == io.EOF && hdr != nil) {
		return nil, fmt.Errorf("headers: %w", err)
	}
	req := &Request{Method: method, Target: target, Proto: proto, Header: hdr, ContentLength: -1}
	if cl := hdr.Get("Content-Length"); cl != "" {
		n, err := strconv.ParseInt(strings.TrimSpace(cl), 10, 64)
		if err != nil || n < 0 {
			return nil, fmt.Errorf("invalid Content-Length %q", cl)
		}
		req.ContentLength = n
		req.Body = &exactReader{r: io.LimitReader(br, n), left: n}
	} else {
		req.Body = br
	}
	return req, nil
}

// limitedLines hands bytes to textproto one at a time so that its bufio
// never holds body bytes, and stops a header section that never ends.
type limitedLines struct {
	r *bufio.Reader
	n int
}

func (l *limitedLines) Read(p []byte) (int, error) {
	if l.n <= 0 {
		return 0, fmt.Errorf("request line and headers exceed %d bytes", MaxHeaderBytes)
	}
	if len(p) == 0 {
		return 0, nil
	}
	b, err := l.r.ReadByte()
	if err != nil {
		return 0, err
	}
	l.n--
	p[0] = b
	return 1, nil
}

// exactReader fails when the input ends before the declared length.
type exactReader struct {
	r    io.Reader
	left int64
}

func (e *exactReader) Read(p []byte) (int, error) {
	n, err := e.r.Read(p)
	e.left -= int64(n)
	if err == io.EOF && e.left > 0 {
		return n, ErrShortBody
	}
	return n, err
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
