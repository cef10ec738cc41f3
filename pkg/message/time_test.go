package message

import (
	"testing"
	"time"
)

func TestParseTime(t *testing.T) {
	tests := []struct{ in, want string }{
		{"2024-05-01T12:00:00.123Z", "2024-05-01T12:00:00.123Z"},
		{"2024-05-01T14:00:00+02:00", "2024-05-01T12:00:00.000Z"},
		{"2024-05-01T12:00:00.123456789-01:30", "2024-05-01T13:30:00.123Z"},
		{"2024-05-01", "2024-05-01T00:00:00.000Z"},
		{"1714564800", "2024-05-01T12:00:00.000Z"},
		{"1714564800123", "2024-05-01T12:00:00.123Z"},
	}
	for _, tt := range tests {
		got, err := ParseTime(tt.in)
		if err != nil {
			t.Errorf("ParseTime(%q): %v", tt.in, err)
			continue
		}
		if s := FormatTime(got); s != tt.want {
			t.Errorf("ParseTime(%q) = %s, want %s", tt.in, s, tt.want)
		}
	}
	for _, bad := range []string{"", "yesterday", "2024-13-01", "-5", "2024-05-01 12:00"} {
		if _, err := ParseTime(bad); err == nil {
			t.Errorf("ParseTime(%q) = nil error", bad)
		}
	}
}

func TestFormatTimeUTCMillis(t *testing.T) {
	tm := time.Date(2024, 5, 1, 12, 0, 0, 999_999_999, time.FixedZone("x", 3600))
	if got := FormatTime(tm); got != "2024-05-01T11:00:00.999Z" {
		t.Errorf("FormatTime = %s", got)
	}
}
