//go:build linux

package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/evfwd/evfwd/pkg/message"
)

// webPath and webKind are the web rows' defaults: Analytics.js posts a
// track call to /v1/t, from a source of kind web (issue 28), which adds
// context.ip and corrects the device's clock. The null collector is serve's
// HTTP stack and collector on a store that keeps nothing, so it serves the
// same path for the same kind of source. -web-path /v1/track -web-kind ""
// measure what a server source's single-event requests cost.
const (
	webPath = "/v1/t"
	webKind = "web"
)

// webLimit bounds one run of the web load: past it no request starts and
// the rate is over the requests answered.
const webLimit = 60 * time.Second

// postSingles has conns keep-alive connections post total single-event
// requests to path, one request per message as Analytics.js sends them
// (text/plain, Basic auth, messageIds prefix-i), each connection waiting
// for its answer before the next request. It stops at total or after
// limit, and reports the requests answered 200, the time from the first
// request to the last answer and every request's latency (from its first
// send to its 200), sorted.
//
// The requests go through rawConn, not net/http's client, which costs
// this machine's two cores about as much CPU a request as the null
// collector serving it: the bench would mostly measure itself.
func postSingles(ctx context.Context, base, path string, conns, total int, prefix string, limit time.Duration) (measured, error) {
	addr := strings.TrimPrefix(base, "http://")
	head := "POST " + path + " HTTP/1.1\r\nHost: " + addr + "\r\nAuthorization: Basic " +
		base64.StdEncoding.EncodeToString([]byte(writeKey+":")) + "\r\nContent-Type: text/plain\r\nContent-Length: "
	var next atomic.Int64
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	lats := make([][]time.Duration, conns)
	var wg sync.WaitGroup
	start := time.Now()
	deadline := start.Add(limit)
	for w := range conns {
		wg.Go(func() {
			rc := &rawConn{addr: addr}
			defer rc.close()
			var req, body []byte
			lat := make([]time.Duration, 0, total/conns+1)
			for k := next.Add(1) - 1; k < int64(total) && ctx.Err() == nil; k = next.Add(1) - 1 {
				t := time.Now()
				if t.After(deadline) {
					break
				}
				body = appendWebTrack(body[:0], prefix, int(k), t)
				req = append(append(strconv.AppendInt(append(req[:0], head...), int64(len(body)), 10), "\r\n\r\n"...), body...)
				if err := rc.send(ctx, req); err != nil {
					cancel(fmt.Errorf("POST %s: %w", path, err))
					break
				}
				lat = append(lat, time.Since(t))
			}
			lats[w] = lat
		})
	}
	wg.Wait()
	m := measured{elapsed: time.Since(start), lat: slices.Concat(lats...)}
	slices.Sort(m.lat)
	m.n = len(m.lat)
	return m, context.Cause(ctx)
}

// rawConn is one keep-alive HTTP/1.1 connection that sends a request
// written out in full and reads the answer's status, Content-Length and
// body: all the bench needs of the collector's answers, at a fraction of
// net/http's cost.
type rawConn struct {
	addr string
	c    net.Conn
	r    *bufio.Reader
}

// send sends req until it is answered 200, waiting a little after each
// 429 and dialing again when the server closed the connection; any other
// answer is an error.
func (rc *rawConn) send(ctx context.Context, req []byte) error {
	for ctx.Err() == nil {
		status, msg, err := rc.roundTrip(req)
		switch {
		case err != nil:
			return err
		case status == http.StatusOK:
			return nil
		case status == http.StatusTooManyRequests:
			time.Sleep(5 * time.Millisecond)
		default:
			return fmt.Errorf("%d %s: %s", status, http.StatusText(status), bytes.TrimSpace(msg))
		}
	}
	return ctx.Err()
}

// roundTrip writes req and reads one answer.
func (rc *rawConn) roundTrip(req []byte) (status int, body []byte, err error) {
	if rc.c == nil {
		if rc.c, err = net.Dial("tcp", rc.addr); err != nil {
			return 0, nil, err
		}
		rc.r = bufio.NewReaderSize(rc.c, 4096)
	}
	if _, err := rc.c.Write(req); err != nil {
		rc.close()
		return 0, nil, err
	}
	line, err := rc.r.ReadSlice('\n')
	if err != nil {
		rc.close()
		return 0, nil, err
	}
	if len(line) < 12 || !bytes.HasPrefix(line, []byte("HTTP/1.1 ")) {
		rc.close()
		return 0, nil, fmt.Errorf("bad status line %q", line)
	}
	status, _ = strconv.Atoi(string(line[9:12]))
	length, closing := -1, false
	for {
		line, err := rc.r.ReadSlice('\n')
		if err != nil {
			rc.close()
			return 0, nil, err
		}
		line = bytes.TrimRight(line, "\r\n")
		if len(line) == 0 {
			break
		}
		k, v, _ := bytes.Cut(line, []byte(":"))
		v = bytes.TrimSpace(v)
		switch {
		case bytes.EqualFold(k, []byte("Content-Length")):
			length, _ = strconv.Atoi(string(v))
		case bytes.EqualFold(k, []byte("Connection")):
			closing = bytes.EqualFold(v, []byte("close"))
		case bytes.EqualFold(k, []byte("Transfer-Encoding")):
			rc.close()
			return 0, nil, fmt.Errorf("%d answer with Transfer-Encoding %s: not read", status, v)
		}
	}
	if length < 0 {
		rc.close()
		return 0, nil, fmt.Errorf("%d answer without Content-Length", status)
	}
	body = make([]byte, length)
	if _, err := io.ReadFull(rc.r, body); err != nil {
		rc.close()
		return 0, nil, err
	}
	if closing {
		rc.close()
	}
	return status, body, nil
}

func (rc *rawConn) close() {
	if rc.c != nil {
		rc.c.Close()
		rc.c, rc.r = nil, nil
	}
}

// appendWebTrack appends the body Analytics.js 2.0 (analytics-next) posts
// for one track call from a page: about 700 bytes with the page, the user
// agent and the library in its context, its own messageId (prefix-k) and
// sentAt, and the write key, built without fmt.
func appendWebTrack(b []byte, prefix string, k int, at time.Time) []byte {
	ts := message.AppendTime(nil, at)
	b = append(b, `{"timestamp":"`...)
	b = append(b, ts...)
	b = append(b, `","integrations":{},"type":"track","properties":{"product_id":"sku-`...)
	b = strconv.AppendInt(b, int64(k%977), 10)
	b = append(b, `","price":49.95,"currency":"EUR"},"event":"Product Viewed","messageId":"ajs-next-`...)
	b = append(b, prefix...)
	b = append(b, '-')
	b = strconv.AppendInt(b, int64(k), 10)
	b = append(b, `","anonymousId":"4f1c2a7e-9b3d-4e8a-a1f0-`...)
	b = appendPadded(b, k%1_000_000_000_000, 12)
	b = append(b, `","context":{"page":{"path":"/products/blue-shoes","referrer":"https://www.google.com/",`+
		`"search":"?utm_source=newsletter","title":"Blue Shoes | Example Shop","url":"https://shop.example.com/products/blue-shoes?utm_source=newsletter"},`+
		`"userAgent":"Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0.0.0 Safari/537.36",`+
		`"userAgentData":{"brands":[{"brand":"Chromium","version":"124"},{"brand":"Google Chrome","version":"124"}],"mobile":false,"platform":"Linux"},`+
		`"locale":"en-US","library":{"name":"analytics.js","version":"npm:next-1.84.0"},"timezone":"Europe/Berlin"},`+
		`"writeKey":"`+writeKey+`","userId":null,"sentAt":"`...)
	b = append(b, ts...)
	return append(b, `","_metadata":{"bundled":["Segment.io"],"unbundled":[],"bundledIds":[]}}`...)
}

// appendPadded appends n in decimal, left-padded with zeros to width.
func appendPadded(b []byte, n, width int) []byte {
	s := strconv.Itoa(n)
	for range width - len(s) {
		b = append(b, '0')
	}
	return append(b, s...)
}
