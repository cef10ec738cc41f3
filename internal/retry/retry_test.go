package retry

import (
	"context"
	"testing"
	"time"
)

func TestStatus(t *testing.T) {
	for code, want := range map[int]bool{200: false, 301: false, 400: false, 404: false, 408: true, 429: true, 500: true, 503: true, 599: true, 600: false} {
		if got := Status(code); got != want {
			t.Errorf("Status(%d) = %v, want %v", code, got, want)
		}
	}
}

func TestAfter(t *testing.T) {
	now := time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"", 0, false},
		{"2", 2 * time.Second, true},
		{" 120 ", 2 * time.Minute, true},
		{"99999999999999999999999", MaxAfter, true},
		{"-1", 0, false},
		{"1.5", 0, false},
		{"Wed, 01 May 2024 12:00:30 GMT", 30 * time.Second, true},
		{"Wed, 01 May 2024 11:00:00 GMT", 0, true},
		{"soon", 0, false},
	}
	for _, tt := range tests {
		got, ok := After(tt.in, now)
		if got != tt.want || ok != tt.ok {
			t.Errorf("After(%q) = %v, %v; want %v, %v", tt.in, got, ok, tt.want, tt.ok)
		}
	}
}

func TestExponential(t *testing.T) {
	var got []time.Duration
	for n := 1; n <= 6; n++ {
		got = append(got, Exponential(time.Second, 10*time.Second, n))
	}
	want := []time.Duration{1, 2, 4, 8, 10, 10}
	for i := range want {
		if got[i] != want[i]*time.Second {
			t.Fatalf("Exponential = %v, want 1s 2s 4s 8s 10s 10s", got)
		}
	}
}

func TestSleepCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := Sleep(ctx, time.Hour); err != context.Canceled {
		t.Errorf("Sleep = %v, want context.Canceled", err)
	}
	if err := Sleep(context.Background(), 0); err != nil {
		t.Errorf("Sleep(0) = %v", err)
	}
}

func FuzzAfter(f *testing.F) {
	f.Add("120")
	f.Add("Wed, 01 May 2024 12:00:30 GMT")
	f.Fuzz(func(t *testing.T, v string) {
		d, ok := After(v, time.Now())
		if d < 0 || d > MaxAfter || !ok && d != 0 {
			t.Fatalf("After(%q) = %v, %v", v, d, ok)
		}
	})
}
