package capture

import (
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParse(t *testing.T) {
	tests := []struct {
		name       string
		in         string
		wantTarget string
		wantSig    string
		wantBody   string
		wantErr    string
	}{
		{
			name:       "CRLF with Content-Length",
			in:         "POST /hooks HTTP/1.1\r\nHost: x\r\nX-Signature: abc\r\nContent-Length: 7\r\n\r\n{\"a\":1}trailing junk",
			wantTarget: "/hooks", wantSig: "abc", wantBody: `{"a":1}`,
		},
		{
			name:       "LF only, no Content-Length: rest of file",
			in:         "POST /h?x=1 HTTP/1.1\nx-signature: def\n\n{\"a\":1}\n",
			wantTarget: "/h?x=1", wantSig: "def", wantBody: "{\"a\":1}\n",
		},
		{
			name:       "body with CRLF bytes kept",
			in:         "POST / HTTP/1.1\r\nContent-Length: 4\r\n\r\na\r\nb",
			wantTarget: "/", wantBody: "a\r\nb",
		},
		{
			name:       "no body",
			in:         "POST / HTTP/1.1\r\nContent-Length: 0\r\n\r\n",
			wantTarget: "/", wantBody: "",
		},
		{name: "short body", in: "POST / HTTP/1.1\r\nContent-Length: 10\r\n\r\nabc", wantErr: ErrShortBody.Error()},
		{name: "bad content length", in: "POST / HTTP/1.1\r\nContent-Length: -1\r\n\r\n", wantErr: `invalid Content-Length "-1"`},
		{name: "not a request", in: "{\"type\":\"track\"}\n", wantErr: "line 1: not an HTTP request line"},
		{name: "empty", in: "", wantErr: "empty request file"},
		{name: "bad header", in: "POST / HTTP/1.1\r\nno colon here\r\n\r\n", wantErr: "headers:"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, err := Parse(strings.NewReader(tt.in))
			var body []byte
			if err == nil {
				body, err = io.ReadAll(req.Body)
			}
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want it to contain %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := []string{req.Method, req.Target, req.Header.Get("X-Signature"), string(body)}
			want := []string{"POST", tt.wantTarget, tt.wantSig, tt.wantBody}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseHeaderLimit(t *testing.T) {
	in := "POST / HTTP/1.1\r\nX-Big: " + strings.Repeat("a", MaxHeaderBytes) + "\r\n\r\n"
	if _, err := Parse(strings.NewReader(in)); err == nil {
		t.Fatal("a header section over the limit parsed")
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte("POST /hooks HTTP/1.1\r\nX-Signature: abc\r\nContent-Length: 2\r\n\r\n{}"))
	f.Add([]byte("POST / HTTP/1.1\n\nbody"))
	f.Add([]byte("GET  HTTP/1.1\r\n\r\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		req, err := Parse(strings.NewReader(string(data)))
		if err != nil {
			return
		}
		body, err := io.ReadAll(req.Body)
		if err != nil && !errors.Is(err, ErrShortBody) {
			t.Fatalf("body read: %v", err)
		}
		if req.ContentLength >= 0 && err == nil && int64(len(body)) != req.ContentLength {
			t.Fatalf("body has %d bytes, Content-Length %d", len(body), req.ContentLength)
		}
		if len(body) > len(data) {
			t.Fatal("body longer than input")
		}
	})
}
