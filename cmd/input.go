package cmd

import (
	"io"
	"os"

	"github.com/evfwd/evfwd/internal/cli"
)

// openInput opens a FILE argument; "" and "-" mean stdin. A file that
// cannot be opened is an input error (exit 2).
func openInput(io_ *cli.IOStreams, path string) (io.ReadCloser, string, error) {
	if path == "" || path == "-" {
		return io.NopCloser(io_.In), "stdin", nil
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, path, cli.UsageError(err)
	}
	return f, path, nil
}
