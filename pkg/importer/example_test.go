package importer_test

import (
	"context"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/evfwd/evfwd/pkg/analytics"
	"github.com/evfwd/evfwd/pkg/importer"
)

// An import reports each line that was not accepted by its place, and
// where to resume.
func Example() {
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `{"success":true}`) // a Segment-compatible collection API
	}))
	defer api.Close()

	lines := `{"type":"track","userId":"u_1","event":"Order Completed","properties":{"total":12.50}}
{"type":"track","userId":"u_2"}
{"type":"identify","userId":"u_3","traits":{"plan":"pro"}}
`
	im, err := importer.New([]importer.Input{importer.Stream("events.ndjson", strings.NewReader(lines))}, importer.Options{
		Client:      analytics.Config{WriteKey: "wk_live_123", Endpoint: api.URL},
		OnLineError: func(e *importer.LineError) { fmt.Println(e) },
	})
	if err != nil {
		log.Fatal(err)
	}
	// Run returns once every line is settled. Ending its context stops
	// reading and still delivers what is queued; im.Abandon, from another
	// goroutine, gives that up too (what a first and second Ctrl-C do).
	sum := im.Run(context.Background())
	fmt.Printf("%d accepted, %d rejected, resume after %s\n", sum.Accepted, sum.Rejected, sum.LastAccepted)
	// Output:
	// events.ndjson:2: track: event is required
	// 2 accepted, 1 rejected, resume after events.ndjson:3
}
