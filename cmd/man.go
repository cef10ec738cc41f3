package cmd

import (
	"fmt"
	"os"

	"github.com/evfwd/evfwd/internal/cli"
	"github.com/spf13/cobra"
	"github.com/spf13/cobra/doc"
)

// referenceDir is where the repository keeps the Markdown reference that
// `evfwd man --markdown` writes; TestReference holds it to the code.
const referenceDir = "docs/reference"

// NewCmdMan writes man pages, or the Markdown reference; hidden, used by
// releases and by TestReference.
func NewCmdMan(f *cli.Factory) *cobra.Command {
	var (
		dir      string
		markdown bool
	)
	cmd := &cobra.Command{
		Use:    "man",
		Short:  "Generate man pages, or the Markdown reference",
		Hidden: true,
		Args:   cli.Args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, args []string) error {
			root := cmd.Root()
			if markdown {
				if dir == "" {
					return cli.UsageError(fmt.Errorf("--markdown writes one page per command: name the folder with --dir (the repository's is %s)", referenceDir))
				}
				return writeReference(root, dir)
			}
			root.DisableAutoGenTag = true
			header := &doc.GenManHeader{Title: "EVFWD", Section: "1", Source: "evfwd " + f.Version}
			if dir == "" {
				return doc.GenMan(root, header, f.IO.Out)
			}
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return err
			}
			if err := doc.GenManTree(root, header, dir); err != nil {
				return fmt.Errorf("write man pages: %w", err)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&dir, "dir", "", "write one page per command into `DIR` (default: evfwd.1 to stdout)")
	cmd.Flags().BoolVar(&markdown, "markdown", false, "write Markdown pages (evfwd_send.md, ...) instead of man pages")
	return cmd
}

// writeReference writes one Markdown page per visible command into dir,
// with no generation date, so that the pages change only when the
// commands do.
func writeReference(root *cobra.Command, dir string) error {
	root.DisableAutoGenTag = true
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := doc.GenMarkdownTree(root, dir); err != nil {
		return fmt.Errorf("write the Markdown reference: %w", err)
	}
	return nil
}
