package cli

import (
	"fmt"
	"io"
	"os"
	"strings"
)

// ReadArg reads a flag value that may be given inline, as @FILE, or as -
// for stdin, and returns its bytes with a name for messages ("argument",
// the file, or "stdin"). Errors are usage errors naming the flag.
func (s *IOStreams) ReadArg(flag, val string) ([]byte, string, error) {
	switch {
	case val == "-":
		b, err := io.ReadAll(s.In)
		if err != nil {
			return nil, "stdin", UsageErrorf("%s: read stdin: %v", flag, err)
		}
		return b, "stdin", nil
	case strings.HasPrefix(val, "@"):
		b, err := os.ReadFile(val[1:])
		if err != nil {
			return nil, val[1:], UsageError(fmt.Errorf("%s: %w", flag, err))
		}
		return b, val[1:], nil
	default:
		return []byte(val), "argument", nil
	}
}
