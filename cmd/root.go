// Package cmd holds evfwd's cobra commands. Each file is one command: an
// options struct, NewCmdX that fills it from flags, and xRun that does the
// work through library code under pkg/.
package cmd

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/evfwd/evfwd/internal/cli"
	"github.com/evfwd/evfwd/pkg/store"
	"github.com/spf13/cobra"
)

// Command groups, in the order help lists them.
const (
	groupClient = "client"
	groupServer = "server"
	groupTools  = "tools"
)

// commands builds every command under the root. Each file has one
// constructor, called once per command it builds: NewCmdSync for audience
// and trait, NewCmdCall for each of the six calls, the others once.
func commands(f *cli.Factory) []*cobra.Command {
	cmds := []*cobra.Command{
		NewCmdSync(f, store.KindAudience, nil),
		NewCmdSync(f, store.KindTrait, nil),
	}
	for _, k := range callKinds {
		cmds = append(cmds, NewCmdCall(f, k, nil))
	}
	return append(cmds,
		NewCmdDelete(f, nil),
		NewCmdDeliveries(f),
		NewCmdDemo(f),
		NewCmdDestinations(f, nil),
		NewCmdHealthcheck(f, nil),
		NewCmdListen(f, nil),
		NewCmdMan(f),
		NewCmdRoute(f, nil),
		NewCmdSend(f, nil),
		NewCmdServe(f, nil),
		NewCmdSign(f, nil),
		NewCmdTrigger(f, nil),
		NewCmdVerify(f, nil),
		NewCmdVersion(f),
	)
}

// NewRootCmd builds the evfwd command tree on f.
func NewRootCmd(f *cli.Factory) *cobra.Command {
	var (
		output     string
		configFile string
		cpuProfile string
	)
	root := &cobra.Command{
		Use:   "evfwd",
		Short: "Collect analytics events and forward them to signed webhooks",
		Long: `evfwd collects analytics events (the Segment HTTP Tracking API) and forwards
each one as a signed HTTP POST to up to five webhook URLs. It is also the
developer's kit around that: a batching client, a local receiver that checks
X-Signature, and offline signing for CI.`,
		Example: `  evfwd demo                                   # the whole pipeline on loopback
  evfwd track --user-id u_42 --event "Order Completed" --property total=12.50
  cat events.ndjson | evfwd send
  evfwd listen --secret-file hook.secret
  evfwd sign --secret-file hook.secret body.json`,
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       f.Version,
		PersistentPreRunE: func(cmd *cobra.Command, args []string) error {
			format, err := cli.ParseFormat(output)
			if err != nil {
				return err
			}
			f.Format = format
			path, explicit := cli.FindConfig(cli.ConfigSearch{
				Flag: configFile, FlagSet: cmd.Flags().Changed("config"), Env: f.Getenv(cli.EnvPrefix + "CONFIG"),
				Local: f.LocalConfig, User: f.DefaultConfig,
			})
			cfg, err := cli.LoadConfig(path, explicit)
			if err != nil {
				return err
			}
			f.Config = cfg
			if err := startCPUProfile(cmd, cpuProfile); err != nil {
				return err
			}
			return cfg.Apply(cmd, f.Getenv)
		},
	}
	root.SetVersionTemplate("evfwd {{.Version}}\n")
	root.PersistentFlags().StringVarP(&output, "output", "o", "text", "output format: text or json")
	root.PersistentFlags().StringVar(&configFile, "config", "", "config `FILE`; '' reads none (default ./evfwd.yaml, else $XDG_CONFIG_HOME/evfwd/config.yaml; env EVFWD_CONFIG)")
	root.PersistentFlags().StringVar(&cpuProfile, "cpuprofile", "", "write a CPU profile to `FILE` (for performance reports)")
	root.PersistentFlags().MarkHidden("cpuprofile")
	root.SetFlagErrorFunc(cli.FlagError)
	root.SetIn(f.IO.In)
	root.SetOut(f.IO.Out)
	root.SetErr(f.IO.ErrOut)
	root.SetHelpTemplate(root.HelpTemplate() + exitCodesHelp)
	used := map[string]bool{}
	for _, c := range commands(f) {
		used[c.GroupID] = true
		root.AddCommand(c)
	}
	for _, g := range []*cobra.Group{
		{ID: groupClient, Title: "Send events (batching client):"},
		{ID: groupServer, Title: "Collect and forward:"},
		{ID: groupTools, Title: "Webhook developer tools:"},
	} {
		if used[g.ID] {
			root.AddGroup(g)
		}
	}
	return root
}

const exitCodesHelp = `
Exit codes:
  0    success (serve and listen: also stopped by Ctrl-C or SIGTERM)
  1    the job failed (invalid signature, delivery failed, events rejected)
  2    usage or input error
  130  a one-shot command interrupted by Ctrl-C (listen: before --count)
`

// Execute runs evfwd with the process's arguments and returns its exit code.
func Execute(version string) int {
	f := cli.NewFactory(version)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return run(ctx, f, os.Args[1:])
}

func run(ctx context.Context, f *cli.Factory, args []string) int {
	root := NewRootCmd(f)
	root.SetArgs(args)
	err := usageFromCobra(root.ExecuteContext(ctx))
	if err != nil && ctx.Err() != nil && cli.ExitCode(err) == cli.ExitFailure {
		// Work that ended because of Ctrl-C exits 130, whatever error it
		// surfaced on the way out.
		err = &cli.ExitError{Code: cli.ExitInterrupted, Err: err}
	}
	if msg := errMessage(err); msg != "" {
		fmt.Fprintln(f.IO.ErrOut, f.IO.ErrStyles().Fail.Sprint("error: ")+msg)
	}
	return cli.ExitCode(err)
}

// usageFromCobra gives exit 2 to the usage errors cobra reports as plain
// errors before any command runs.
func usageFromCobra(err error) error {
	var ee *cli.ExitError
	if err == nil || errors.As(err, &ee) {
		return err
	}
	for _, prefix := range []string{"unknown command", "required flag", "if any flags in the group", "invalid argument", "accepts "} {
		if strings.HasPrefix(err.Error(), prefix) {
			return cli.UsageError(err)
		}
	}
	return err
}

func errMessage(err error) string {
	if err == nil {
		return ""
	}
	return cli.Message(err)
}
