package serve_test

import (
	"regexp"
	"strings"
	"testing"

	"github.com/evfwd/evfwd/pkg/serve"
)

// A weak admin token is a config error naming the rule (issue 29,
// finding 6: "a" and "   " were accepted, the latter logged in).
func TestAdminTokenStrength(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ token, want string }{
		{"", ""},
		{"a", "admin_token: 1 characters, at least 16 are required"},
		{"   ", "admin_token: only whitespace"},
		{strings.Repeat(" ", 20), "admin_token: only whitespace"},
		{"\t\n", "admin_token: only whitespace"},
		{"0123456789abcde", "admin_token: 15 characters, at least 16 are required"},
		{"0123456789abcdef", ""},
		{strongToken, ""},
	} {
		cfg := serve.Config{Sources: []serve.Source{{Name: "web", WriteKey: "wk_web"}}, AdminToken: tc.token}
		err := cfg.Validate()
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("token %q: %v", tc.token, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("token %q: %v, want %q", tc.token, err, tc.want)
		case err != nil && len(tc.token) > 4 && strings.TrimSpace(tc.token) != "" && strings.Contains(err.Error(), tc.token):
			t.Errorf("the error shows the token: %v", err)
		}
	}
}

// serve init writes a fresh admin token of 32 random bytes, commented: the
// admin API stays off until it is uncommented, and then passes Validate.
func TestInitConfigAdminToken(t *testing.T) {
	t.Parallel()
	token := func() string {
		_, config := serve.InitConfig()
		m := regexp.MustCompile(`(?m)^# admin_token: ([0-9a-f]+)$`).FindSubmatch(config)
		if m == nil {
			t.Fatalf("no commented admin_token in\n%s", config)
		}
		return string(m[1])
	}
	a, b := token(), token()
	if len(a) != 64 || a == b {
		t.Errorf("tokens %q, %q: want 64 hex digits, fresh each time", a, b)
	}
	cfg := serve.Config{Sources: []serve.Source{{Name: "web", WriteKey: "wk_web"}}, AdminToken: a}
	if err := cfg.Validate(); err != nil {
		t.Error(err)
	}
}
