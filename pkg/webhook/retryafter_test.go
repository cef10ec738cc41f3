package webhook

import (
	"net/http"
	"testing"
	"time"
)

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		in     string
		want   time.Duration
		wantOK bool
	}{
		{"", 0, false},
		{"0", 0, true},
		{" 120 ", 2 * time.Minute, true},
		{"99999999999999999999999", maxRetryAfter, true},
		{"100000", maxRetryAfter, true},
		{"-5", 0, false},
		{"1.5", 0, false},
		{"soon", 0, false},
		{now.Add(90 * time.Second).Format(http.TimeFormat), 90 * time.Second, true},
		{now.Add(-time.Hour).Format(http.TimeFormat), 0, true},
		{"Wed, 01 May 2024 12:00:30 GMT", 30 * time.Second, true},
		{"Wednesday, 01-May-24 12:00:30 GMT", 30 * time.Second, true},
	}
	for _, tt := range tests {
		got, ok := ParseRetryAfter(tt.in, now)
		if got != tt.want || ok != tt.wantOK {
			t.Errorf("ParseRetryAfter(%q) = %v, %v; want %v, %v", tt.in, got, ok, tt.want, tt.wantOK)
		}
	}
}

func FuzzParseRetryAfter(f *testing.F) {
	for _, s := range []string{"0", "120", "Wed, 01 May 2024 12:00:30 GMT", "99999999999999999999", "-1", ""} {
		f.Add(s)
	}
	now := time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, s string) {
		d, ok := ParseRetryAfter(s, now)
		if d < 0 || d > maxRetryAfter || (!ok && d != 0) {
			t.Errorf("ParseRetryAfter(%q) = %v, %v", s, d, ok)
		}
	})
}
