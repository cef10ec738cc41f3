package cmd

import (
	"strings"

	"github.com/evfwd/evfwd/pkg/signature"
	"github.com/spf13/cobra"
)

// addSchemeFlag registers --scheme with its default and completions; auto
// only where a request's headers can tell the scheme.
func addSchemeFlag(cmd *cobra.Command, v *string, def signature.Scheme, auto bool) {
	names := signature.Names(auto)
	cmd.Flags().StringVar(v, "scheme", string(def), "signature `SCHEME`: "+strings.Join(names, ", ")+" (see evfwd sign --help)")
	cmd.RegisterFlagCompletionFunc("scheme", cobra.FixedCompletions(names, cobra.ShellCompDirectiveNoFileComp))
}
