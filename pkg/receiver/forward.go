package receiver

import (
	"bytes"
	"io"
	"net/http"
	"strconv"
)

// maxForwardBody bounds the app's answer kept for the report.
const maxForwardBody = 1 << 20

// hopHeaders belong to one connection and are not relayed (RFC 9110 7.6.1).
var hopHeaders = []string{
	"Connection", "Keep-Alive", "Proxy-Connection", "Te", "Trailer",
	"Transfer-Encoding", "Upgrade",
}

// relay sends the request on to the app and answers with its response;
// when the app cannot be reached the sender gets 502.
func (h *Handler) relay(w http.ResponseWriter, r *http.Request, req *Request) {
	u := *h.forward
	out, err := http.NewRequestWithContext(r.Context(), r.Method, u.String(), bytes.NewReader(req.Body))
	if err != nil {
		h.relayFailed(w, req, err)
		return
	}
	out.Header = r.Header.Clone()
	for _, k := range hopHeaders {
		out.Header.Del(k)
	}
	out.ContentLength = int64(len(req.Body))
	start := h.now()
	resp, err := h.client.Do(out)
	if err != nil {
		h.relayFailed(w, req, err)
		return
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxForwardBody))
	fw := &Forwarded{URL: h.forward.String(), Status: resp.StatusCode, Header: resp.Header, Body: body, Latency: h.now().Sub(start)}
	if err != nil {
		fw.Error = err.Error()
	}
	req.Forward = fw
	hdr := w.Header()
	for k, v := range resp.Header {
		hdr[k] = v
	}
	for _, k := range hopHeaders {
		hdr.Del(k)
	}
	hdr.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(resp.StatusCode)
	w.Write(body)
	h.finish(req, resp.StatusCode)
}

func (h *Handler) relayFailed(w http.ResponseWriter, req *Request, err error) {
	req.Forward = &Forwarded{URL: h.forward.String(), Error: err.Error()}
	h.answer(w, req, http.StatusBadGateway, "forwarding failed")
}
