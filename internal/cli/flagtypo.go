package cli

import (
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// FlagError is the root's flag error function: every flag error is a usage
// error (exit 2), and an unknown long flag gets the nearest flag of the
// command, as cobra does for command names (`did you mean --user-id?`).
func FlagError(cmd *cobra.Command, err error) error {
	const prefix = "unknown flag: --"
	msg := err.Error()
	if !strings.HasPrefix(msg, prefix) {
		return UsageError(err)
	}
	var names []string
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		if !f.Hidden {
			names = append(names, f.Name)
		}
	})
	if s := SuggestFlag(strings.TrimPrefix(msg, prefix), names); s != "" {
		return UsageError(fmt.Errorf("%w (did you mean --%s?)", err, s))
	}
	return UsageError(err)
}

// SuggestFlag returns the flag name of names that typed most likely meant,
// or "": the only one typed begins (--user for --user-id), else the
// nearest by edit distance (--sercet for --secret), else the only one
// that begins typed (--user-ids for --user-id).
func SuggestFlag(typed string, names []string) string {
	typed = strings.ToLower(typed)
	if typed == "" {
		return ""
	}
	if s, err := only(names, func(n string) bool { return strings.HasPrefix(n, typed) }); err == nil {
		return s
	}
	if s := nearest(typed, names); s != "" {
		return s
	}
	s, _ := only(names, func(n string) bool { return len(n) >= 3 && strings.HasPrefix(typed, n) })
	return s
}

var errNotOne = errors.New("not exactly one")

// only returns the one name that match accepts; an error when none or
// several do.
func only(names []string, match func(string) bool) (string, error) {
	found := ""
	for _, n := range names {
		if !match(n) {
			continue
		}
		if found != "" {
			return "", errNotOne
		}
		found = n
	}
	if found == "" {
		return "", errNotOne
	}
	return found, nil
}
