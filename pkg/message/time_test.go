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

func TestParseWireAgreesWithTimeParse(t *testing.T) {
	for _, s := range []string{"2024-05-01T12:00:00.123Z", "2024-02-29T23:59:59.999Z", "2023-02-29T00:00:00.000Z", "2024-13-01T00:00:00.000Z",
		"2024-05-01T24:00:00.000Z", "2024-05-01T12:60:00.000Z", "2024-05-01T12:00:60.000Z", "2024-05-01T12:00:00.12xZ", "0000-01-01T00:00:00.000Z"} {
		want, err := time.Parse(time.RFC3339Nano, s)
		got, ok := parseWire(s)
		if ok != (err == nil) || ok && !got.Equal(want) {
			t.Errorf("parseWire(%q) = %v, %v; time.Parse = %v, %v", s, got, ok, want, err)
		}
	}
}

func FuzzParseTime(f *testing.F) {
	f.Add("2024-05-01T12:00:00.123Z")
	f.Add("2024-05-01")
	f.Fuzz(func(t *testing.T, s string) {
		if got, ok := parseWire(s); ok {
			want, err := time.Parse(time.RFC3339Nano, s)
			if err != nil || !got.Equal(want) {
				t.Fatalf("parseWire(%q) = %v; time.Parse = %v, %v", s, got, want, err)
			}
		}
	})
}
