package cmd

import (
	"fmt"
	"os"

	"github.com/evfwd/evfwd/internal/cli"
	"github.com/spf13/cobra"
	"github.com/spf13/cobra/doc"
)

// NewCmdMan writes man pages; hidden, used by releases.
func NewCmdMan(f *cli.Factory) *cobra.Command {
	var dir string
	cmd := &cobra.Command{
		Use:    "man",
		Short:  "Generate man pages",
		Hidden: true,
		Args:   cli.Args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, args []string) error {
			root := cmd.Root()
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
	return cmd
}
