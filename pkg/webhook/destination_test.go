package webhook

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestDestinationValidate(t *testing.T) {
	eps := func(urls ...string) []Endpoint {
		var out []Endpoint
		for _, u := range urls {
			out = append(out, Endpoint{URL: u})
		}
		return out
	}
	tests := []struct {
		name string
		dest Destination
		want string // "" = valid
	}{
		{"one https", Destination{Endpoints: eps("https://hooks.example/in")}, ""},
		{"five mixed", Destination{Endpoints: eps("http://a.example", "https://b.example:8443/x?y=1", "HTTPS://c.example", "http://127.0.0.1:9/", "http://[::1]:80/")}, ""},
		{"none", Destination{}, "endpoints: at least one webhook URL is required"},
		{"six", Destination{Endpoints: eps("http://a", "http://b", "http://c", "http://d", "http://e", "http://f")}, "endpoints: 6 webhook URLs, at most 5 are allowed"},
		{"relative", Destination{Endpoints: eps("hooks.example/in")}, "endpoints[0] (hooks.example/in): no scheme; did you mean https://hooks.example/in?"},
		{"host and port, no scheme", Destination{Endpoints: eps("127.0.0.1:8788/hooks")}, "endpoints[0] (127.0.0.1:8788/hooks): no scheme; did you mean http://127.0.0.1:8788/hooks?"},
		{"no //", Destination{Endpoints: eps("https:hooks.example/in")}, "endpoints[0] (https:hooks.example/in): the // after https: is missing; did you mean https://hooks.example/in?"},
		{"ftp", Destination{Endpoints: eps("https://ok.example", "ftp://files.example/")}, `endpoints[1] (ftp://files.example/): scheme "ftp": only http and https are supported`},
		{"no host", Destination{Endpoints: eps("https:///path")}, "endpoints[0] (https:///path): URL has no host"},
		{"credentials", Destination{Endpoints: eps("https://u:p@h.example/")}, "endpoints[0] (https://****@h.example/): credentials in the URL (user:password@) are not supported; use a static Authorization header"},
		{"empty", Destination{Endpoints: eps("")}, "endpoints[0]: URL is required"},
		{"bad header name", Destination{Endpoints: []Endpoint{{URL: "https://h.example", Headers: map[string]string{"X Bad": "v"}}}}, `endpoints[0] (https://h.example): header "X Bad": not a valid header name`},
		{"reserved header any case", Destination{Endpoints: []Endpoint{{URL: "http://a.example"}, {URL: "http://b.example"}, {URL: "https://h.example", Headers: map[string]string{"x-signature": "v", "content-TYPE": "text/plain", "Host": "h", "Content-Length": "1", "Authorization": "Bearer t"}}}},
			strings.Join([]string{
				`endpoints[2] (https://h.example): header "Content-Length": set by the sender, it cannot be configured`,
				`endpoints[2] (https://h.example): header "Host": set by the sender, it cannot be configured`,
				`endpoints[2] (https://h.example): header "content-TYPE": set by the sender, it cannot be configured`,
				`endpoints[2] (https://h.example): header "x-signature": set by the sender, it cannot be configured`,
			}, "\n")},
		{"header value newline", Destination{Endpoints: []Endpoint{{URL: "https://h.example", Headers: map[string]string{"X-Token": "a\r\nX-Evil: 1"}}}}, `endpoints[0] (https://h.example): header "X-Token": value contains a control character`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.dest.Validate()
			got := ""
			if err != nil {
				got = err.Error()
				if !errors.Is(err, ErrInvalidConfig) {
					t.Errorf("errors.Is(err, ErrInvalidConfig) = false")
				}
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("mismatch (-want +got):\n%s", diff)
			}
		})
	}
}
