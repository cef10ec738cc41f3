package cmd

import (
	"os"
	"runtime/pprof"

	"github.com/evfwd/evfwd/internal/cli"
	"github.com/spf13/cobra"
)

// startCPUProfile profiles the command into path until it returns: a
// hidden --cpuprofile flag so that a slow run in the field can be measured
// as it happened.
func startCPUProfile(cmd *cobra.Command, path string) error {
	if path == "" {
		return nil
	}
	out, err := os.Create(path)
	if err != nil {
		return cli.UsageErrorf("--cpuprofile: %v", err)
	}
	if err := pprof.StartCPUProfile(out); err != nil {
		out.Close()
		return cli.UsageErrorf("--cpuprofile: %v", err)
	}
	cmd.PersistentPostRun = func(*cobra.Command, []string) {
		pprof.StopCPUProfile()
		out.Close()
	}
	return nil
}
