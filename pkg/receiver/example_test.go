package receiver_test

import (
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/evfwd/evfwd/pkg/receiver"
	"github.com/evfwd/evfwd/pkg/signature"
)

// The Handler is evfwd listen's engine: mount it in your own tests to check
// what a sender delivers.
func Example() {
	h, err := receiver.New(receiver.Options{
		Secrets: [][]byte{[]byte("s3cret")},
		OnRequest: func(r *receiver.Request) {
			fmt.Println(r.Type, r.Event, r.Signature.Verdict == receiver.SigValid, r.Status)
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()

	body := `{"type":"track","version":1,"userId":"u_42","event":"Order Completed","timestamp":"2024-05-01T12:00:00.000Z"}`
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/hooks", strings.NewReader(body))
	req.Header.Set(signature.Header, signature.Sign([]byte("s3cret"), []byte(body)))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		log.Fatal(err)
	}
	resp.Body.Close()
	// Output: track Order Completed true 200
}
