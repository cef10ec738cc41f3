// Command baseline is what evfwd send is measured against: it POSTs NDJSON
// lines unparsed, in batches of -batch lines, one request at a time (as one
// client does), to ENDPOINT/v1/batch, and prints lines/s and MB/s.
package main

import (
	"bufio"
	"bytes"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"
)

func main() {
	endpoint := flag.String("endpoint", "http://127.0.0.1:8787", "collection API base URL")
	size := flag.Int("batch", 100, "lines per request")
	flag.Parse()
	br := bufio.NewReaderSize(os.Stdin, 1<<20)
	var body bytes.Buffer
	client := &http.Client{}
	lines, n, bytesIn := 0, 0, int64(0)
	start := time.Now()
	post := func() {
		if n == 0 {
			return
		}
		body.WriteString(`],"sentAt":"2024-05-01T12:00:00.000Z"}`)
		resp, err := client.Post(*endpoint+"/v1/batch", "application/json", bytes.NewReader(body.Bytes()))
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		body.Reset()
		n = 0
	}
	for {
		line, err := br.ReadSlice('\n')
		if len(line) > 1 {
			bytesIn += int64(len(line))
			if n == 0 {
				body.WriteString(`{"batch":[`)
			} else {
				body.WriteByte(',')
			}
			body.Write(bytes.TrimRight(line, "\n"))
			n++
			lines++
			if n == *size {
				post()
			}
		}
		if err != nil {
			break
		}
	}
	post()
	secs := time.Since(start).Seconds()
	fmt.Printf("%d %.3f %d\n", lines, secs, bytesIn)
}
