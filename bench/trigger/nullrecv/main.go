// Command nullrecv is the benchmark's webhook endpoint: it reads each
// body, checks X-Signature when given a secret, and answers 200 over
// keep-alive connections. It prints its URL on stdout once listening and
// its counts on stderr when it gets SIGINT/SIGTERM.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/evfwd/evfwd/pkg/signature"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:0", "listen address")
	secret := flag.String("secret", "", "shared secret; when set, every request must be signed")
	flag.Parse()

	var requests, bad atomic.Int64
	bufs := sync.Pool{New: func() any { b := make([]byte, 0, 4096); return &b }}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		bp := bufs.Get().(*[]byte)
		body := (*bp)[:0]
		for {
			if len(body) == cap(body) {
				body = append(body, 0)[:len(body)]
			}
			n, err := r.Body.Read(body[len(body):cap(body)])
			body = body[:len(body)+n]
			if err == io.EOF {
				break
			}
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
		}
		if *secret != "" && signature.Verify([]byte(*secret), body, r.Header.Get(signature.Header)) != nil {
			bad.Add(1)
			http.Error(w, "bad signature", http.StatusUnauthorized)
		} else {
			w.Write(ok)
		}
		*bp = body
		bufs.Put(bp)
	})
	l, err := net.Listen("tcp", *addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Printf("http://%s/hook\n", l.Addr())
	srv := &http.Server{Handler: h}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go srv.Serve(l)
	<-ctx.Done()
	srv.Close()
	fmt.Fprintf(os.Stderr, "requests %d bad_signatures %d\n", requests.Load(), bad.Load())
}

var ok = []byte("OK")
