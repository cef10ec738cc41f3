package cmd

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestURLFlagsWithoutScheme: every URL flag a user types says what to add
// when the scheme is missing (cli.CheckURLScheme), exit 2, before any
// connection is tried.
func TestURLFlagsWithoutScheme(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"trigger", "track", "--url", "127.0.0.1:9100/x"}, "--url 127.0.0.1:9100/x: no scheme; did you mean http://127.0.0.1:9100/x?"},
		{[]string{"track", "--write-key", "k", "--user-id", "u", "--event", "E", "--endpoint", "127.0.0.1:9100"}, "--endpoint 127.0.0.1:9100: no scheme; did you mean http://127.0.0.1:9100?"},
		{[]string{"send", "--write-key", "k", "--endpoint", "localhost:8080", "-"}, "--endpoint localhost:8080: no scheme; did you mean http://localhost:8080?"},
		{[]string{"delete", "--user-id", "u", "--admin-token", "t", "--endpoint", "evfwd.example.com"}, "--endpoint evfwd.example.com: no scheme; did you mean https://evfwd.example.com?"},
		{[]string{"listen", "--forward-to", "localhost:3000/hooks"}, "--forward-to localhost:3000/hooks: no scheme; did you mean http://localhost:3000/hooks?"},
		{[]string{"serve", "--check", "--forward-to", "127.0.0.1:8788/hooks"}, "--forward-to 127.0.0.1:8788/hooks: no scheme; did you mean http://127.0.0.1:8788/hooks?"},
	} {
		r := execute(t, testFactory(t, "", false, nil), tt.args...)
		if diff := cmp.Diff(result{Stderr: "error: " + tt.want + "\n", Code: 2}, r); diff != "" {
			t.Errorf("%v (-want +got):\n%s", tt.args, diff)
		}
	}
}
