package cmd

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/evfwd/evfwd/internal/cli"
	"github.com/evfwd/evfwd/pkg/rawjson"
	"github.com/spf13/cobra"
)

// stdinOnce hands stdin to at most one JSON argument.
type stdinOnce struct {
	io   *cli.IOStreams
	used string // the flag that took it
}

// jsonArg reads a JSON-object flag value: inline JSON, @FILE, or - for
// stdin. "" gives nil. Numbers keep their digits; whitespace is dropped.
func jsonArg(stdin *stdinOnce, flag, val string) (*rawjson.Object, error) {
	switch {
	case val == "":
		return nil, nil
	case val == "-" && stdin.used != "":
		return nil, cli.UsageErrorf("%s -: stdin is already read by %s", flag, stdin.used)
	case val == "-":
		stdin.used = flag
	}
	data, _, err := stdin.io.ReadArg(flag, val)
	if err != nil {
		return nil, err
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, data); err != nil {
		return nil, cli.UsageErrorf("%s: invalid JSON: %v", flag, err)
	}
	obj, err := rawjson.ParseObject(compact.Bytes())
	if err != nil {
		return nil, cli.UsageErrorf("%s: want a JSON object: %v", flag, err)
	}
	return obj, nil
}

// parsePair reads key=value or key:=JSON. A value that is a JSON number
// (exact digits kept) or true/false is sent as that; anything else as a
// string.
func parsePair(p string) (string, json.RawMessage, error) {
	i := strings.IndexByte(p, '=')
	if i <= 0 || (i == 1 && p[0] == ':') {
		return "", nil, errors.New("want key=value or key:=JSON")
	}
	key, val := p[:i], p[i+1:]
	if k, ok := strings.CutSuffix(key, ":"); ok {
		var b bytes.Buffer
		if err := json.Compact(&b, []byte(val)); err != nil {
			return "", nil, fmt.Errorf("invalid JSON after :=: %v", err)
		}
		return k, b.Bytes(), nil
	}
	if val == "true" || val == "false" || isJSONNumber(val) {
		return key, json.RawMessage(val), nil
	}
	return key, rawjson.AppendString(nil, val), nil
}

// isJSONNumber reports whether s is exactly one JSON number literal.
func isJSONNumber(s string) bool {
	if s == "" || (s[0] != '-' && (s[0] < '0' || s[0] > '9')) {
		return false
	}
	return strings.TrimSpace(s) == s && json.Valid([]byte(s))
}

// pairArgs refuses arguments, as cobra.NoArgs does, except that the
// arguments after --flag pairs that lack their "=" are taken for those
// pairs' values, typed with a space: "--property total 129.95" is answered
// "did you mean --property total=129.95?", not "unknown command".
func pairArgs(flag string, pairs *[]string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		var meant []string
		rest := args
		for _, p := range *pairs {
			if len(rest) > 0 && !strings.Contains(p, "=") {
				meant = append(meant, "--"+flag+" "+shellArg(p+"="+rest[0]))
				rest = rest[1:]
			}
		}
		if len(meant) > 0 {
			return cli.UsageErrorf("did you mean %s? (key=value, no space)", strings.Join(meant, " "))
		}
		return cli.Args(cobra.NoArgs)(cmd, args)
	}
}
