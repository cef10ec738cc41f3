package cmd

import (
	"bytes"
	"fmt"
	"strconv"

	"github.com/evfwd/evfwd/internal/cli"
	"github.com/evfwd/evfwd/pkg/receiver"
	"github.com/evfwd/evfwd/pkg/signature"
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
	secret, err := opts.Secret.Resolve("verify", true)
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
			fmt.Fprintf(opts.IO.ErrOut, "%s:%v\n", name, err)
			continue
		}
		v := verdictOfRecord(secret, rec)
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
		what := rec.Method + " " + rec.Path
		if rec.Type != "" {
			what += " " + rec.Type
		}
		fmt.Fprintf(opts.IO.Out, "%s:%d  %s  %s  %s\n", name, rec.Line, mark, what, v.Message)
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

// verdictOfRecord checks a recorded request's X-Signature against its
// recorded body bytes, explaining a failure as `verify` does.
func verdictOfRecord(secret []byte, rec *receiver.Record) Verdict {
	sig, present := rec.Headers[signature.Header]
	if !present {
		return Verdict{Reason: "missing", Message: "the request had no X-Signature header"}
	}
	v, _ := check(secret, bytes.NewReader(rec.RawBody()), "body", sig) // reading memory cannot fail
	return v
}
