package cmd

import (
	"fmt"
	"net/http"
	"strconv"

	"github.com/evfwd/evfwd/internal/cli"
	"github.com/evfwd/evfwd/pkg/receiver"
)

// recordVerdict is one line of `verify --record -o json`.
type recordVerdict struct {
	Line   int    `json:"line"`
	Method string `json:"method,omitempty"`
	Path   string `json:"path,omitempty"`
	Type   string `json:"type,omitempty"`
	Verdict
}

// verifyRecordRun re-checks the signature of every request in a file that
// `evfwd listen --record` wrote, one verdict per line. Exit 1 when any
// request fails, 2 when none fails but a line could not be read.
func verifyRecordRun(opts *VerifyOptions) error {
	if opts.File != "" || opts.Signature != "" || opts.Request != "" {
		return cli.UsageErrorf("--record takes bodies and signatures from the record file: give no FILE, --signature or --request")
	}
	setup, err := newVerifySetup(opts)
	if err != nil {
		return err
	}
	in, name, err := openInput(opts.IO, opts.Record)
	if err != nil {
		return err
	}
	defer in.Close()
	st := opts.IO.OutStyles()
	var valid, invalid, unreadable int
	for rec, err := range receiver.ReadRecords(in) {
		if err != nil {
			unreadable++
			fmt.Fprintf(opts.IO.ErrOut, "%s:%s\n", cli.Printable(name), cli.Printable(err.Error()))
			continue
		}
		v, err := verdictOfRecord(setup, rec)
		if err != nil {
			return err
		}
		if v.Valid {
			valid++
		} else {
			invalid++
		}
		if opts.Format.JSON() {
			if err := cli.WriteJSON(opts.IO.Out, recordVerdict{Line: rec.Line, Method: rec.Method, Path: rec.Path, Type: rec.Type, Verdict: v}); err != nil {
				return err
			}
			continue
		}
		mark := st.OK.Sprint(cli.SymOK)
		if !v.Valid {
			mark = st.Fail.Sprint(cli.SymFail)
		}
		// The record holds what a sender chose: printable.
		what := rec.Method + " " + rec.Path
		if rec.Type != "" {
			what += " " + rec.Type
		}
		fmt.Fprintf(opts.IO.Out, "%s:%d  %s  %s  %s\n", cli.Printable(name), rec.Line, mark, cli.Printable(what), v.line())
	}
	if !opts.Format.JSON() {
		fmt.Fprintf(opts.IO.ErrOut, "%d valid, %d invalid%s\n", valid, invalid, unreadableNote(unreadable))
	}
	switch {
	case invalid > 0:
		return cli.Silent(cli.ExitFailure)
	case unreadable > 0:
		return cli.Silent(cli.ExitUsage)
	case valid == 0:
		return cli.UsageErrorf("%s holds no recorded requests", name)
	}
	return nil
}

func unreadableNote(n int) string {
	if n == 0 {
		return ""
	}
	return ", " + strconv.Itoa(n) + " unreadable line(s)"
}

// verdictOfRecord checks a recorded request's signature against its
// recorded body bytes, judged at the time it arrived.
func verdictOfRecord(setup *verifySetup, rec *receiver.Record) (Verdict, error) {
	h := make(http.Header, len(rec.Headers))
	for k, v := range rec.Headers {
		h[http.CanonicalHeaderKey(k)] = []string{v}
	}
	c, err := setup.newCheck(h, rec.ReceivedAt)
	if err != nil {
		return Verdict{}, err
	}
	c.Write(rec.RawBody())
	return verdictOf(c.Result()), nil
}
