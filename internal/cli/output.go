package cli

import (
	"encoding/json"
	"fmt"
	"io"
)

// Format is how a command prints its results: text for people, json for
// scripts (one JSON object per line on stdout, nothing else there).
type Format string

const (
	FormatText Format = "text"
	FormatJSON Format = "json"
)

// ParseFormat validates the --output flag.
func ParseFormat(s string) (Format, error) {
	switch f := Format(s); f {
	case FormatText, FormatJSON:
		return f, nil
	}
	return "", UsageErrorf("invalid --output %q: want text or json", s)
}

// JSON reports whether the format is json.
func (f Format) JSON() bool { return f == FormatJSON }

// WriteJSON writes v as one compact JSON line.
func WriteJSON(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode output: %w", err)
	}
	_, err = w.Write(append(b, '\n'))
	return err
}
