package signature

import (
	"testing"
	"time"
)

func TestAgo(t *testing.T) {
	const day = 24 * time.Hour
	for _, tt := range []struct {
		d    time.Duration
		want string
	}{
		{26582*time.Hour + 18*time.Minute + 11*time.Second, "3 years ago"}, // the expired signature
		{365 * day, "1 year ago"},
		{364 * day, "12 months ago"},
		{45 * day, "1 month ago"},
		{2*day + 23*time.Hour, "2 days ago"},
		{47 * time.Hour, "1 day ago"},
		{23*time.Hour + 59*time.Minute, "23 hours ago"},
		{time.Hour, "1 hour ago"},
		{5*time.Minute + 59*time.Second, "5 minutes ago"},
		{time.Minute, "1 minute ago"},
		{59*time.Second + 900*time.Millisecond, "59 seconds ago"},
		{time.Second, "1 second ago"},
		{999 * time.Millisecond, "less than a second ago"},
		{0, "less than a second ago"},
		{-3 * time.Minute, "in 3 minutes"},
		{-10 * time.Second, "in 10 seconds"},
		{-2 * 365 * day, "in 2 years"},
	} {
		if got := Ago(tt.d); got != tt.want {
			t.Errorf("Ago(%v) = %q, want %q", tt.d, got, tt.want)
		}
	}
}
