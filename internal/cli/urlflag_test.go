package cli

import "testing"

func TestCheckURLScheme(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{"127.0.0.1:9100/x", "--url 127.0.0.1:9100/x: no scheme; did you mean http://127.0.0.1:9100/x?"},
		{"localhost:3000/hooks", "--url localhost:3000/hooks: no scheme; did you mean http://localhost:3000/hooks?"},
		{"[::1]:8080", "--url [::1]:8080: no scheme; did you mean http://[::1]:8080?"},
		{"app:3000", "--url app:3000: no scheme; did you mean http://app:3000?"},
		{"hooks.example.com/in", "--url hooks.example.com/in: no scheme; did you mean https://hooks.example.com/in?"},
		// Credentials stay out of the message.
		{"hooks.example.com/in?token=s3cret", "--url hooks.example.com/in?token=****: no scheme; did you mean https://hooks.example.com/in?token=****?"},
		{"user:pw@10.0.0.2/in", "--url ****@10.0.0.2/in: no scheme; did you mean http://****@10.0.0.2/in?"},
		// Not this check's business: the callers' own checks follow.
		{"", ""},
		{"http://127.0.0.1:9100/x", ""},
		{"ftp://example.com/", ""},
		{"http:hooks.example/in", "--url http:hooks.example/in: the // after http: is missing; did you mean http://hooks.example/in?"},
		{"https:/10.0.0.2/in?k=v", "--url https:10.0.0.2/in?k=****: the // after https: is missing; did you mean https://10.0.0.2/in?k=****?"},
	} {
		err := CheckURLScheme("--url", tt.in)
		got := ""
		if err != nil {
			got = err.Error()
			if ExitCode(err) != ExitUsage {
				t.Errorf("%q: exit %d, want %d", tt.in, ExitCode(err), ExitUsage)
			}
		}
		if got != tt.want {
			t.Errorf("%q:\n got %s\nwant %s", tt.in, got, tt.want)
		}
	}
}
