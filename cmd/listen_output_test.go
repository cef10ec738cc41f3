package cmd

import (
	"strings"
	"testing"
)

// TestListenSaysSignaturesUnchecked: a listen without a secret says at its
// start, plainly, that it checks no signature and how to make it (issue
// 41); with one, it says what it verifies and nothing of the kind.
func TestListenSaysSignaturesUnchecked(t *testing.T) {
	for _, tt := range []struct {
		name string
		args []string
		want []string
		not  []string
	}{
		{"no secret", nil,
			[]string{"(signatures NOT checked: no secret)\n", "! no secret: signatures are NOT checked, and every request is answered 200\n",
				"  to check them: evfwd listen --secret-file FILE (or EVFWD_SECRET, or --secret)\n"}, nil},
		{"a secret", []string{"--secret", listenSecret}, []string{"(verifying signatures of any scheme"}, []string{"NOT checked", "no secret"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			l := startListen(t, testFactory(t, "", false, nil), tt.args...)
			got := l.f.IO.ErrOut.(interface{ String() string }).String()
			for _, w := range tt.want {
				if !strings.Contains(got, w) {
					t.Errorf("stderr %q does not say %q", got, w)
				}
			}
			for _, n := range tt.not {
				if strings.Contains(got, n) {
					t.Errorf("stderr %q says %q", got, n)
				}
			}
		})
	}
}
