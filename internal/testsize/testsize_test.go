package testsize

import "testing"

func TestPick(t *testing.T) {
	t.Setenv(FullEnv, "")
	if got, want := Pick(10, 1), map[bool]int{true: 1, false: 10}[Race]; got != want {
		t.Errorf("Pick(10, 1) = %d with Race %v, want %d", got, Race, want)
	}
	t.Setenv(FullEnv, "1")
	if got := Pick(10, 1); got != 10 {
		t.Errorf("Pick(10, 1) with %s=1 = %d, want 10", FullEnv, got)
	}
}
