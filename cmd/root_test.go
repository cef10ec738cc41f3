package cmd

import "testing"

// A mistyped flag gets the command's nearest flag, and exits 2 (issue 30,
// row 10).
func TestUnknownFlagSuggestion(t *testing.T) {
	for _, tt := range []struct {
		args   []string
		stderr string
	}{
		{[]string{"track", "--user", "u_1", "--event", "E"}, "error: unknown flag: --user (did you mean --user-id?)\n"},
		{[]string{"serve", "--chek"}, "error: unknown flag: --chek (did you mean --check?)\n"},
		{[]string{"deliveries", "list", "--stauts", "dead"}, "error: unknown flag: --stauts (did you mean --status?)\n"},
		{[]string{"serve", "--outptu", "json"}, "error: unknown flag: --outptu (did you mean --output?)\n"}, // the root's
		{[]string{"sign", "--nope"}, "error: unknown flag: --nope\n"},
		{[]string{"sign", "-Z"}, "error: unknown shorthand flag: 'Z' in -Z\n"},
	} {
		res := execute(t, testFactory(t, "", false, nil), tt.args...)
		if res.Code != 2 || res.Stderr != tt.stderr || res.Stdout != "" {
			t.Errorf("%v: code %d, stdout %q, stderr %q; want 2 and %q", tt.args, res.Code, res.Stdout, res.Stderr, tt.stderr)
		}
	}
}
