package cli

import (
	"bytes"
	"fmt"
	"os"

	"github.com/spf13/cobra"
)

// Secret is the shared secret of a destination, given by --secret,
// --secret-file, EVFWD_SECRET or the config file, in that order. It is
// never printed.
type Secret struct {
	Value string // --secret
	File  string // --secret-file

	// Where Resolve looks when no flag gives it (see Lookup).
	getenv func(string) string
	config *Config
}

// Lookup tells Resolve where to look when no flag gives the secret: getenv
// for EVFWD_SECRET, then cfg. Without it, only the flags count.
func (s *Secret) Lookup(getenv func(string) string, cfg *Config) { s.getenv, s.config = getenv, cfg }

// AddFlags registers --secret and --secret-file on cmd.
func (s *Secret) AddFlags(cmd *cobra.Command) {
	cmd.Flags().StringVar(&s.Value, "secret", "", "shared secret (prefer --secret-file or "+EnvPrefix+"SECRET: flags show in ps)")
	cmd.Flags().StringVar(&s.File, "secret-file", "", "read the shared secret from `FILE` (one trailing newline ignored)")
}

// Resolve returns the secret, or nil when none is given and required is
// false; the config file is read under command's section. Two flags at
// once, an unreadable file, an empty secret or, when required, no secret
// at all are usage errors.
func (s *Secret) Resolve(command string, required bool) ([]byte, error) {
	switch {
	case s.Value != "" && s.File != "":
		return nil, UsageErrorf("--secret and --secret-file: give one, not both")
	case s.Value != "":
		return []byte(s.Value), nil
	case s.File != "":
		return readSecretFile(s.File)
	}
	if s.getenv != nil {
		if v := s.getenv(EnvPrefix + "SECRET"); v != "" {
			return []byte(v), nil
		}
	}
	if s.config != nil {
		if v, ok := s.config.Lookup(command, "secret"); ok && v != "" {
			return []byte(v), nil
		}
		if p, ok := s.config.Lookup(command, "secret-file"); ok && p != "" {
			return readSecretFile(p)
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
