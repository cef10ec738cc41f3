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

// copyInput streams r into w with a large buffer: fewer reads per gigabyte
// of body, memory still constant. Wrapping r hides a WriterTo that would
// pick a smaller one.
func copyInput(w io.Writer, r io.Reader) (int64, error) {
	return io.CopyBuffer(w, struct{ io.Reader }{r}, make([]byte, 256<<10))
}
