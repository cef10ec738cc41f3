package webhook

import (
	"errors"
	"slices"
	"strings"
)

// SettingErrors restates err, the problems Validate or CheckAddresses
// found, in the words of the settings the user gave the destination as:
// urls names what gave its URLs (trigger's --url, serve's --forward-to),
// headers what gave its static headers ("" when nothing did). A problem
// every URL shares (a static header's) is said once, and the problems
// come one a line. A destination from a config file needs none of this:
// its errors name the keys already.
func SettingErrors(err error, urls, headers string) error {
	if err == nil {
		return nil
	}
	all := []error{err}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		all = j.Unwrap()
	}
	var lines []string
	for _, e := range all {
		line := urls + ": " + e.Error()
		var ce *ConfigError
		if errors.As(e, &ce) {
			switch {
			case ce.Index < 0:
				line = urls + ": " + strings.Replace(ce.Reason, "webhook URLs", "URLs", 1)
			case headers != "" && strings.HasPrefix(ce.Reason, "header "):
				line = headers + strings.TrimPrefix(ce.Reason, "header")
			default:
				line = urls + " " + ce.URL + ": " + ce.Reason
			}
		}
		if !slices.Contains(lines, line) {
			lines = append(lines, line)
		}
	}
	return errors.New(strings.Join(lines, "\n"))
}
