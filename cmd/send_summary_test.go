package cmd

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
)

// TestSendBytesAreNDJSON: the summary's bytes are the NDJSON's, in the
// text and -o json alike, gzip or not; -o json gives the bytes read from
// the input too (issue 41: json gave the gzip size, text 3.9 KB).
func TestSendBytesAreNDJSON(t *testing.T) {
	content := genLines(200)
	plain := writeFile(t, "in.ndjson", content)
	gz := gzipFile(t, "in.ndjson.gz", content)
	fi, err := os.Stat(gz)
	if err != nil {
		t.Fatal(err)
	}
	gzSize := fi.Size()
	for _, tt := range []struct {
		file  string
		input int64
		note  string
	}{
		{plain, int64(len(content)), ""},
		{gz, gzSize, humanBytes(gzSize) + " read, gzip"},
	} {
		srv := newCollectServer(t, nil)
		res := execute(t, clientFactory(t, "", srv), "send", tt.file, "-o", "json")
		var sum sendSummary
		if err := json.Unmarshal([]byte(res.Stdout), &sum); err != nil || res.Code != 0 {
			t.Fatalf("%s: exit %d, %v: %s", tt.file, res.Code, err, res.Stdout)
		}
		if sum.Bytes != int64(len(content)) || sum.InputBytes != tt.input {
			t.Errorf("%s: bytes %d, inputBytes %d; want %d, %d", tt.file, sum.Bytes, sum.InputBytes, len(content), tt.input)
		}
		res = execute(t, clientFactory(t, "", newCollectServer(t, nil)), "send", tt.file)
		row := fmt.Sprintf("  %-15s %12s", "bytes", humanBytes(int64(len(content))))
		if tt.note != "" {
			row += "  " + tt.note
		}
		if !strings.Contains(res.Stdout, row+"\n") {
			t.Errorf("%s: no row %q in:\n%s", tt.file, row, res.Stdout)
		}
	}
}

// TestSendRefusedKeySaysWhatToFix: a refused write key's summary says to
// fix the key, not to run the same command again, which would be refused
// the same way (issue 41).
func TestSendRefusedKeySaysWhatToFix(t *testing.T) {
	file := writeFile(t, "in.ndjson", genLines(50))
	res := execute(t, clientFactory(t, "", newCollectServer(t, refuseKey(401))), "send", file)
	want := "nothing was settled: the API refused the write key: fix --write-key or EVFWD_WRITE_KEY, then send again\n"
	if res.Code != 1 || !strings.HasSuffix(res.Stdout, want) || strings.Contains(res.Stdout, "run the same command again") {
		t.Errorf("exit %d, summary:\n%s\nwant it to end %q", res.Code, res.Stdout, want)
	}
}
