package webhook

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// A destination given by flags has its problems said by the flags: a URL
// by the flag and the URL, a static header by its flag, once for all URLs.
func TestSettingErrors(t *testing.T) {
	bad := Destination{Endpoints: []Endpoint{
		{URL: "ftp://a.example/", Headers: map[string]string{"X-Signature": "1"}},
		{URL: "https://b.example/", Headers: map[string]string{"X-Signature": "1"}},
	}}
	six := Destination{}
	for range 6 {
		six.Endpoints = append(six.Endpoints, Endpoint{URL: "https://a.example/"})
	}
	tests := []struct {
		name          string
		d             Destination
		urls, headers string
		want          string
	}{
		{"url and header", bad, "--url", "--header", `--url ftp://a.example/: scheme "ftp": only http and https are supported` + "\n" +
			`--header "X-Signature": set by the sender, it cannot be configured`},
		{"no header flag", bad, "--forward-to", "", `--forward-to ftp://a.example/: scheme "ftp": only http and https are supported` + "\n" +
			`--forward-to ftp://a.example/: header "X-Signature": set by the sender, it cannot be configured` + "\n" +
			`--forward-to https://b.example/: header "X-Signature": set by the sender, it cannot be configured`},
		{"too many", six, "--url", "--header", "--url: 6 URLs, at most 5 are allowed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := SettingErrors(tt.d.Validate(), tt.urls, tt.headers)
			if err == nil {
				t.Fatal("no error")
			}
			if diff := cmp.Diff(tt.want, err.Error()); diff != "" {
				t.Errorf("mismatch (-want +got):\n%s", diff)
			}
		})
	}
	if err := SettingErrors(nil, "--url", "--header"); err != nil {
		t.Errorf("no problem: %v", err)
	}
}
