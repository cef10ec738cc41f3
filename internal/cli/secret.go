package cli

import (
	"bytes"
	"fmt"
	"os"

	"github.com/spf13/cobra"
)

// Secret is the shared secret of a destination, given by --secret,
// --secret-file, EVFWD_SECRET or the config file, in that order. The flags
// repeat, for a secret being rotated: every one given counts, --secret
// values first, then --secret-file files, each in the order given. It is
// never printed.
type Secret struct {
	Values []string // --secret
	Files  []string // --secret-file

	// Where Resolve looks when no flag gives it (see Lookup).
	getenv func(string) string
	config *Config
}

// Lookup tells Resolve where to look when no flag gives the secret: getenv
// for EVFWD_SECRET, then cfg. Without it, only the flags count.
func (s *Secret) Lookup(getenv func(string) string, cfg *Config) { s.getenv, s.config = getenv, cfg }

// AddFlags registers --secret and --secret-file on cmd.
func (s *Secret) AddFlags(cmd *cobra.Command) {
	cmd.Flags().StringArrayVar(&s.Values, "secret", nil, "shared secret, repeatable (prefer --secret-file or "+EnvPrefix+"SECRET: flags show in ps)")
	cmd.Flags().StringArrayVar(&s.Files, "secret-file", nil, "read a shared secret from `FILE` (one trailing newline ignored), repeatable")
}

// Resolve returns the one secret, or nil when none is given and required
// is false; the config file is read under command's section. More than one
// secret, an unreadable file, an empty secret or, when required, no secret
// at all are usage errors.
func (s *Secret) Resolve(command string, required bool) ([]byte, error) {
	all, err := s.ResolveAll(command, required)
	switch {
	case err != nil || len(all) == 0:
		return nil, err
	case len(all) > 1:
		return nil, UsageErrorf("%d secrets given: %s takes one", len(all), command)
	}
	return all[0], nil
}

// ResolveAll is Resolve for commands that take several secrets: every
// flag's, else the one of EVFWD_SECRET or the config file.
func (s *Secret) ResolveAll(command string, required bool) ([][]byte, error) {
	var all [][]byte
	for _, v := range s.Values {
		if v == "" {
			return nil, UsageErrorf("--secret is empty")
		}
		all = append(all, []byte(v))
	}
	for _, f := range s.Files {
		b, err := readSecretFile(f)
		if err != nil {
			return nil, err
		}
		all = append(all, b)
	}
	if len(all) > 0 {
		return all, nil
	}
	if s.getenv != nil {
		if v := s.getenv(EnvPrefix + "SECRET"); v != "" {
			return [][]byte{[]byte(v)}, nil
		}
	}
	if s.config != nil {
		if v, ok := s.config.Lookup(command, "secret"); ok && v != "" {
			return [][]byte{[]byte(v)}, nil
		}
		if p, ok := s.config.Lookup(command, "secret-file"); ok && p != "" {
			b, err := readSecretFile(p)
			if err != nil {
				return nil, err
			}
			return [][]byte{b}, nil
		}
	}
	if required {
		return nil, UsageErrorf("a shared secret is required: use --secret-file FILE, %sSECRET or --secret", EnvPrefix)
	}
	return nil, nil
}

func readSecretFile(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, UsageErrorf("secret file: %v", err)
	}
	b = bytes.TrimSuffix(b, []byte("\n"))
	b = bytes.TrimSuffix(b, []byte("\r"))
	if len(b) == 0 {
		return nil, UsageError(fmt.Errorf("secret file %s is empty", path))
	}
	return b, nil
}
