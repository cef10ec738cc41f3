package cmd

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/evfwd/evfwd/internal/cli"
	"github.com/evfwd/evfwd/pkg/analytics"
	"github.com/evfwd/evfwd/pkg/importer"
	"github.com/spf13/cobra"
)

// SendOptions are the inputs of `evfwd send`.
type SendOptions struct {
	IO      *cli.IOStreams
	Format  cli.Format
	Now     func() time.Time
	Version string // sent in User-Agent and context.library
	Context context.Context
	Client  clientFlags

	Files        []string
	ErrorsFile   string
	BatchSize    int
	MaxQueueSize int
	Workers      int
	Rate         float64
	Skip         int64
	Resume       string // FILE:LINE, as the summary printed it

	// interrupts is a second interrupt source for tests (default: SIGINT,
	// SIGTERM).
	interrupts <-chan os.Signal
	// progressEvery is between progress redraws (tests shorten it).
	progressEvery time.Duration
}

// NewCmdSend builds `evfwd send`; runF replaces sendRun in tests.
func NewCmdSend(f *cli.Factory, runF func(*SendOptions) error) *cobra.Command {
	opts := &SendOptions{}
	cmd := &cobra.Command{
		Use:   "send [FILE...]",
		Short: "Import NDJSON calls through the batching client",
		Long: `Read NDJSON, one call per line with its "type" (identify, track, page,
screen, group, alias), and send every line through the batching client to
POST {endpoint}/v1/batch. FILEs are read in order; no FILE or "-" reads stdin;
gzip input (.gz, or gzip bytes on stdin) is decompressed on the fly. Memory
stays flat whatever the input size.

Lines keep their exact bytes: numbers keep their digits and unknown fields
survive; only a missing messageId or timestamp is added (and context.library),
and a timestamp in another accepted form is rewritten as UTC with
milliseconds. Blank lines are skipped.

A bad line (invalid JSON, unknown type, a missing required field, over 32 KB)
is reported as FILE:LINE: reason on stderr; every other line still goes. Lines
the API rejects or that cannot be delivered after retries are reported the same
way. --errors-file gets every line read and not accepted, for any reason (those
queued when a run stopped or was abandoned too, which stderr does not list one
by one): each as read, after a "# FILE:LINE: reason" line. send skips lines
that start with #, so the file can be fixed and sent again as it is.

A FILE that cannot be read (missing, a directory, no permission) is reported
first; the other FILEs are still sent, and the exit status is 2. While a batch
is retried, stderr says so once per round: "retrying 100 events in 2s: POST
URL: connection refused (attempt 3 of 10 failed)".

When the queue is full, reading waits (back-pressure). --workers N runs N
independent clients, each with one request in flight; lines go to workers in
fixed blocks, so the same input always splits the same way. --rate caps
events per second.

On a terminal a progress line shows lines read, sent, failed, events/s,
bytes and the ETA (both from the last 10 seconds); a summary follows at the end (-o json: one JSON object).
Ctrl-C stops reading, flushes what is queued and prints the summary with the
last line fully accepted, so an import can resume after it; a second Ctrl-C
stops at once. An API answer of 401 or 403 (a wrong write key) stops the
whole run at once with one error, since every batch would be refused alike.

A run that stopped early prints the --resume FILE:LINE argument that sends
the rest: the same command with it continues after that line of that FILE
(stdin is "stdin" or "-"); the FILEs before it are not opened. --skip N skips
the first N lines of the inputs taken as one stream, as if concatenated.
Skipped lines are read but neither parsed nor sent, and are counted.

Exit status: 0 every line accepted, 1 some line rejected or not delivered, or
the write key refused, 2 usage error (nothing sent) or a FILE not read to its
end, 130 interrupted.`,
		Example: `  cat events.ndjson | evfwd send --write-key $KEY
  evfwd send history-2023.ndjson.gz history-2024.ndjson.gz --errors-file rejected.ndjson
  evfwd send big.ndjson --workers 4 --batch-size 500
  evfwd send events.ndjson --rate 200 --endpoint https://api.segment.io -o json
  evfwd send history-2023.ndjson.gz history-2024.ndjson.gz --resume history-2024.ndjson.gz:81250`,
		GroupID: groupClient,
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.IO, opts.Format, opts.Now, opts.Version = f.IO, f.Format, f.Now, f.Version
			opts.Context = cmd.Context()
			opts.Files = args
			if runF != nil {
				return runF(opts)
			}
			return sendRun(opts)
		},
	}
	fl := cmd.Flags()
	opts.Client.add(cmd)
	fl.StringVar(&opts.ErrorsFile, "errors-file", "", "write every line not accepted, as read, after a # line with why, to `FILE`")
	fl.IntVar(&opts.BatchSize, "batch-size", analytics.DefaultBatchSize, "most messages in one request (a request also stays under 500 KB)")
	fl.IntVar(&opts.MaxQueueSize, "max-queue-size", analytics.DefaultMaxQueueSize, "most messages waiting per worker; reading waits when full")
	fl.IntVar(&opts.Workers, "workers", 1, "independent clients sending in parallel")
	fl.Float64Var(&opts.Rate, "rate", 0, "at most `N` events per second (0: no limit)")
	fl.Int64Var(&opts.Skip, "skip", 0, "skip the first `N` lines, counted across the inputs in order")
	fl.StringVar(&opts.Resume, "resume", "", "continue after `FILE:LINE`, the last accepted line a stopped run printed")
	return cmd
}

func sendRun(opts *SendOptions) error {
	if err := opts.check(); err != nil {
		return err
	}
	cfg, err := opts.Client.config(opts.Version, opts.Now, false)
	if err != nil {
		return err
	}
	cfg.BatchSize, cfg.MaxQueueSize = opts.BatchSize, opts.MaxQueueSize
	console := newConsole(opts.IO)
	console.every = opts.progressEvery
	cfg.OnRetry = newRetryRounds(console, opts.Now).event
	inputs, unread, err := sendInputs(opts.IO, opts.Files)
	if err != nil {
		return err
	}
	// Like cat, a FILE that cannot be read is said first and the others
	// are still sent; with none left there is nothing to report but that.
	said := map[string]bool{}
	for i, e := range unread {
		if len(unread) == len(inputs) && i == len(unread)-1 {
			return cli.UsageError(e)
		}
		console.line("error: " + cli.Printable(e.Error()))
		said[readErrorInputs(unread[i : i+1])[0]] = true
	}
	var resume importer.Position
	if opts.Resume != "" {
		if resume, err = resumePosition(opts.Resume, inputs); err != nil {
			return err
		}
	}
	errorsOut, err := openErrorsFile(opts.ErrorsFile)
	if err != nil {
		return err
	}
	defer errorsOut.close()
	im, err := importer.New(inputs, importer.Options{
		Client: cfg, Workers: opts.Workers, Rate: opts.Rate, KeepLines: errorsOut != nil,
		Skip: opts.Skip, Resume: resume,
		OnLineError: func(e *importer.LineError) {
			console.line(cli.Printable(e.Error())) // it quotes the line
			errorsOut.write(e)
		},
		// Lines a stopped run leaves are one error on stderr (the run's),
		// and each in the errors file.
		OnUnsent: errorsOut.write,
		OnReadError: func(err error) { // called by Run's own goroutine
			if said[readErrorInputs([]error{err})[0]] {
				return
			}
			unread = append(unread, err)
			console.line("error: " + cli.Printable(err.Error()))
		},
	})
	if err != nil {
		var ce *analytics.ConfigError
		if errors.As(err, &ce) {
			return configError(err)
		}
		return cli.UsageError(err) // Options the checks above let through
	}

	readCtx, stop := opts.handleInterrupts(console, im)
	defer stop()
	if opts.IO.ErrTTY {
		meter := &progressMeter{}
		console.startProgress(func() string { return meter.line(im.Summary()) })
	}
	sum := im.Run(readCtx)
	console.stopProgress()
	if err := errorsOut.flush(); err != nil {
		console.line("error: --errors-file: " + cli.Printable(err.Error()))
	}
	interrupted := readCtx.Err() != nil
	if sum.Lines == 0 && len(unread) == len(inputs) && sum.Fatal == nil && !interrupted {
		return cli.Silent(cli.ExitUsage) // no input opened: the errors said it all
	}
	var names []string
	for _, in := range inputs {
		if !said[cli.Printable(in.Name)] {
			names = append(names, in.Name)
		}
	}
	if err := printSendSummary(opts, newSendSummary(names, sum, interrupted, unread)); err != nil {
		return err
	}
	return opts.result(sum, interrupted, unread)
}

func (o *SendOptions) check() error {
	switch {
	case o.Workers < 1:
		return cli.UsageErrorf("--workers must be at least 1")
	case o.BatchSize < 1:
		return cli.UsageErrorf("--batch-size must be at least 1")
	case o.MaxQueueSize < 1:
		return cli.UsageErrorf("--max-queue-size must be at least 1")
	case o.Rate < 0:
		return cli.UsageErrorf("--rate must not be negative")
	case o.Skip < 0:
		return cli.UsageErrorf("--skip must not be negative")
	case o.Skip > 0 && o.Resume != "":
		return cli.UsageErrorf("--skip and --resume exclude each other: --resume alone says where to go on")
	}
	return nil
}

// handleInterrupts installs the two stages of Ctrl-C: the first (root's
// context, or our own signal) stops reading, which cancels the context it
// returns; the second abandons the flush. Call stop when done.
func (o *SendOptions) handleInterrupts(console *console, im *importer.Import) (readCtx context.Context, stop func()) {
	ctx := o.Context
	if ctx == nil {
		ctx = context.Background()
	}
	readCtx, stopReading := context.WithCancel(ctx)
	sigs := o.interrupts
	unnotify := func() {}
	if sigs == nil {
		ch := make(chan os.Signal, 2)
		signal.Notify(ch, os.Interrupt, syscall.SIGTERM)
		unnotify = func() { signal.Stop(ch) }
		sigs = ch
	}
	watching := make(chan struct{})
	go watchInterrupts(watching, sigs, func() {
		stopReading()
		// Delivering what is queued can take a while against a failing
		// endpoint: say what is going on and how to stop it.
		console.line("interrupted: no more lines are read; delivering what is queued (Ctrl-C again to stop at once)")
	}, im.Abandon)
	return readCtx, func() {
		close(watching)
		unnotify()
		stopReading()
	}
}

// result is send's exit: 1 when the run failed or left lines not
// accepted, 2 when an input could not be read, 130 when interrupted.
func (o *SendOptions) result(sum importer.Summary, interrupted bool, unread []error) error {
	inputs := len(o.Files)
	if inputs == 0 {
		inputs = 1 // stdin
	}
	notAccepted := sum.Rejected + sum.Failed + sum.Unsent
	var lines error
	if notAccepted > 0 {
		lines = fmt.Errorf("%d of %s not accepted (%d rejected as bad input, %d not delivered)",
			notAccepted, plural(sum.Lines-sum.Blank-sum.Skipped, "line", "lines"), sum.Rejected, sum.Failed+sum.Unsent)
	}
	switch {
	case errors.Is(sum.Fatal, importer.ErrUnauthorized):
		return &cli.ExitError{Code: cli.ExitFailure, Err: fmt.Errorf("%w: check --write-key or %s", sum.Fatal, cli.EnvName("write-key"))}
	case errors.Is(sum.Fatal, importer.ErrNoServer) && o.Client.hint(sum.Fatal) != "":
		return &cli.ExitError{Code: cli.ExitFailure, Err: fmt.Errorf("%w\n%s", sum.Fatal, o.Client.hint(sum.Fatal))}
	case sum.Fatal != nil:
		return &cli.ExitError{Code: cli.ExitFailure, Err: sum.Fatal}
	case interrupted:
		return cli.Silent(cli.ExitInterrupted)
	case len(unread) > 0:
		// An input error (exit 2) outranks lines refused: the input is
		// what to fix first.
		err := fmt.Errorf("%d of %s not read to the end: %s", len(unread), plural(inputs, "input", "inputs"), strings.Join(readErrorInputs(unread), ", "))
		if lines != nil {
			err = fmt.Errorf("%w; %w", err, lines)
		}
		return cli.UsageError(err)
	case lines != nil:
		return &cli.ExitError{Code: cli.ExitFailure, Err: lines}
	}
	return nil
}

// readErrorInputs names the inputs of errs, printable.
func readErrorInputs(errs []error) []string {
	var out []string
	for _, err := range errs {
		name := err.Error()
		var re *importer.ReadError
		if errors.As(err, &re) {
			name = re.Input
		}
		out = append(out, cli.Printable(name))
	}
	return out
}

// errorsFile is --errors-file: every line read and not accepted, as read,
// each after a "# FILE:LINE: reason" line. send skips lines starting with
// #, so the file can be fixed and sent again as it is.
// A nil *errorsFile (no flag) takes nothing.
type errorsFile struct {
	f  *os.File
	mu sync.Mutex // lines come from every worker
	w  *bufio.Writer
}

func openErrorsFile(path string) (*errorsFile, error) {
	if path == "" {
		return nil, nil
	}
	// It holds events as read: readable by its owner only.
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return nil, cli.UsageErrorf("--errors-file: %v", err)
	}
	return &errorsFile{f: f, w: bufio.NewWriter(f)}, nil
}

// write adds e's reason and line; a line too long to keep leaves its
// reason alone.
func (e *errorsFile) write(le *importer.LineError) {
	if e == nil {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.w.WriteString("# " + oneLine(le.Error(), 1000) + "\n")
	if le.Bytes != nil {
		e.w.Write(le.Bytes)
		e.w.WriteByte('\n')
	}
}

func (e *errorsFile) flush() error {
	if e == nil {
		return nil
	}
	return e.w.Flush()
}

func (e *errorsFile) close() {
	if e != nil {
		e.f.Close()
	}
}

// sendInputs checks every FILE before anything is sent: it returns the
// inputs and, apart, a *importer.ReadError for each that cannot be read
// (missing, a directory, not readable). Stdin twice is a usage error.
func sendInputs(ios *cli.IOStreams, files []string) (inputs []importer.Input, unread []error, err error) {
	if len(files) == 0 {
		files = []string{"-"}
	}
	stdin := false
	for _, p := range files {
		if p == "-" {
			if stdin {
				return nil, nil, cli.UsageErrorf("stdin (-) given twice")
			}
			stdin = true
			inputs = append(inputs, importer.Stream(stdinName, ios.In))
			continue
		}
		in, err := importer.File(p)
		if err != nil {
			// It stays an input, failing at its turn, so that no position
			// past it counts as settled: a resume would skip it.
			unread = append(unread, err)
			in = importer.Input{Name: p, Open: func() (io.ReadCloser, error) { return nil, err }}
		}
		inputs = append(inputs, in)
	}
	return inputs, unread, nil
}

// stdinName is what send calls stdin in positions and summaries.
const stdinName = "stdin"

// resumePosition parses --resume FILE:LINE against the inputs: FILE is
// an input's name as the summary printed it ("-" is stdin too), or the
// same path spelt otherwise (./a.ndjson for a.ndjson).
func resumePosition(arg string, inputs []importer.Input) (importer.Position, error) {
	i := strings.LastIndexByte(arg, ':')
	if i < 0 {
		return importer.Position{}, cli.UsageErrorf("--resume %s: want FILE:LINE, as the summary's last accepted line", arg)
	}
	name, num := arg[:i], arg[i+1:]
	line, err := strconv.ParseInt(num, 10, 64)
	if err != nil || line < 1 {
		return importer.Position{}, cli.UsageErrorf("--resume %s: LINE must be a line number from 1", arg)
	}
	if name == "-" {
		name = stdinName
	}
	var names, found []string
	for _, in := range inputs {
		names = append(names, in.Name)
		if in.Name == name || in.Name != stdinName && filepath.Clean(in.Name) == filepath.Clean(name) {
			found = append(found, in.Name)
		}
	}
	switch len(found) {
	case 0:
		return importer.Position{}, cli.UsageErrorf("--resume %s: %s is not among the inputs (%s)", arg, name, strings.Join(names, ", "))
	case 1:
		return importer.Position{Input: found[0], Line: line}, nil
	}
	return importer.Position{}, cli.UsageErrorf("--resume %s: %s is given more than once; use --skip", arg, name)
}

// watchInterrupts turns signals into the two stages of Ctrl-C. The root's
// context sees the first Ctrl-C too, so only this channel counts them.
func watchInterrupts(done <-chan struct{}, sigs <-chan os.Signal, stopReading, abandon func()) {
	for n := 0; ; n++ {
		select {
		case <-done:
			return
		case <-sigs:
		}
		if n == 0 {
			stopReading()
			continue
		}
		abandon()
		return
	}
}
