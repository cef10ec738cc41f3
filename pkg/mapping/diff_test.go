package mapping

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/evfwd/evfwd/internal/testsize"
)

// The differential test holds evfwd's mapping to Segment's: random
// (mapping, message) pairs through Parse and Apply here and through
// actions-core's transform in one node process (testdata/segment.js), and
// the answers compared. EVFWD_SEGMENT_ENGINES names the directory whose
// node_modules holds @segment/actions-core (CI installs it; without it the
// test skips). EVFWD_MAPPING_SEED varies the pairs.

type segRequest struct {
	ID      int    `json:"id"`
	Mapping string `json:"mapping"`
	Payload string `json:"payload"`
}

type segAnswer struct {
	ID         int     `json:"id"`
	Out        *string `json:"out"`
	Undef      bool    `json:"undef"`
	Error      string  `json:"error"`
	Validation bool    `json:"validation"`
}

// segment runs the requests through node, all of them through one process.
func segment(t *testing.T, reqs []segRequest) []segAnswer {
	t.Helper()
	dir := os.Getenv("EVFWD_SEGMENT_ENGINES")
	if dir == "" {
		t.Skip("EVFWD_SEGMENT_ENGINES is not set: no Segment engine to compare with")
	}
	script, err := filepath.Abs(filepath.Join("testdata", "segment.js"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("node", script, dir)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		w := bufio.NewWriterSize(stdin, 1<<16)
		enc := json.NewEncoder(w)
		for _, r := range reqs {
			if enc.Encode(r) != nil {
				break
			}
		}
		w.Flush()
		stdin.Close()
	}()
	answers := make([]segAnswer, 0, len(reqs))
	sc := bufio.NewScanner(stdout)
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		var a segAnswer
		if err := json.Unmarshal(sc.Bytes(), &a); err != nil {
			t.Fatalf("node answered %q: %v", sc.Bytes(), err)
		}
		answers = append(answers, a)
	}
	if err := cmd.Wait(); err != nil || len(answers) != len(reqs) {
		t.Fatalf("node: %v (%d answers to %d requests)\n%s", err, len(answers), len(reqs), stderr.String())
	}
	return answers
}

// evfwdAnswer is what evfwd does with one pair, in segAnswer's terms;
// refused says Parse refused the mapping on purpose (an unsupported
// directive).
func evfwdAnswer(mapping, msg string) (a segAnswer, refused bool) {
	m, err := Parse([]byte(mapping))
	if err != nil {
		return segAnswer{Error: err.Error(), Validation: true}, strings.Contains(err.Error(), "not supported")
	}
	out, err := m.Apply([]byte(msg))
	switch {
	case err == ErrUndefined:
		return segAnswer{Undef: true}, false
	case err != nil:
		return segAnswer{Error: err.Error()}, false
	}
	s := string(out)
	return segAnswer{Out: &s}, false
}

// sameJSON compares two JSON texts as values; numbers compare as the
// float64 they denote (evfwd keeps a message's digits, 1.0 and
// 12345678901234567890, where JavaScript writes 1 and 12345678901234567000),
// and a number beyond float64 (1e400, which evfwd carries) equals the null
// JSON.stringify writes for Infinity.
func sameJSON(a, b string) bool {
	var va, vb any
	da := json.NewDecoder(strings.NewReader(a))
	da.UseNumber()
	db := json.NewDecoder(strings.NewReader(b))
	db.UseNumber()
	if da.Decode(&va) != nil || db.Decode(&vb) != nil {
		return false
	}
	return sameValue(va, vb)
}

func sameValue(a, b any) bool {
	switch a := a.(type) {
	case json.Number:
		fa, _ := strconv.ParseFloat(string(a), 64)
		if b == nil {
			return math.IsInf(fa, 0)
		}
		bn, ok := b.(json.Number)
		if !ok {
			return false
		}
		fb, _ := strconv.ParseFloat(string(bn), 64)
		return fa == fb
	case nil:
		if bn, ok := b.(json.Number); ok {
			return sameValue(bn, a)
		}
		return b == nil
	case map[string]any:
		bm, ok := b.(map[string]any)
		if !ok || len(a) != len(bm) {
			return false
		}
		for k, v := range a {
			w, ok := bm[k]
			if !ok || !sameValue(v, w) {
				return false
			}
		}
		return true
	case []any:
		ba, ok := b.([]any)
		if !ok || len(a) != len(ba) {
			return false
		}
		for i := range a {
			if !sameValue(a[i], ba[i]) {
				return false
			}
		}
		return true
	}
	if sa, ok := a.(string); ok {
		if sb, ok := b.(string); ok && sa != sb {
			return loneSurrogate.ReplaceAllString(sa, "\uFFFD") == loneSurrogate.ReplaceAllString(sb, "\uFFFD")
		}
	}
	return a == b
}

// loneSurrogate is how JSON.stringify writes half a surrogate pair inside
// a string it encodes (@json encode of a string that was split by UTF-16
// code unit). JavaScript strings can hold one; evfwd's are UTF-8 and hold
// U+FFFD there, as encoding/json reads the escape back.
var loneSurrogate = regexp.MustCompile(`\\u[dD][89a-fA-F][0-9a-fA-F]{2}`)

// agree says whether evfwd's answer is Segment's, and if not, how.
func agree(ev, seg segAnswer) (bool, string) {
	switch {
	case seg.Validation || ev.Validation:
		if seg.Validation != ev.Validation {
			return false, fmt.Sprintf("validity: evfwd refused=%v (%s), Segment refused=%v (%s)", ev.Validation, ev.Error, seg.Validation, seg.Error)
		}
	case (seg.Error != "") != (ev.Error != ""):
		return false, fmt.Sprintf("error: evfwd %q, Segment %q", ev.Error, seg.Error)
	case seg.Error != "":
	case seg.Undef != ev.Undef:
		return false, fmt.Sprintf("undefined: evfwd %v, Segment %v", ev.Undef, seg.Undef)
	case seg.Out != nil && (ev.Out == nil || !sameJSON(*ev.Out, *seg.Out)):
		got := "<none>"
		if ev.Out != nil {
			got = *ev.Out
		}
		return false, fmt.Sprintf("output:\n  evfwd   %s\n  Segment %s", got, *seg.Out)
	}
	return true, ""
}

func TestDifferential(t *testing.T) {
	if os.Getenv("EVFWD_SEGMENT_ENGINES") == "" {
		t.Skip("EVFWD_SEGMENT_ENGINES is not set: no Segment engine to compare with")
	}
	seed := int64(1)
	if s := os.Getenv("EVFWD_MAPPING_SEED"); s != "" {
		var err error
		if seed, err = strconv.ParseInt(s, 10, 64); err != nil {
			t.Fatalf("EVFWD_MAPPING_SEED: %v", err)
		}
	}
	// 10,000 pairs hold the property under -race on two cores in a few
	// seconds; the full run compares five times as many.
	n := testsize.Pick(50000, 10000)
	g := &gen{r: rand.New(rand.NewSource(seed))}
	reqs := make([]segRequest, n)
	for i := range reqs {
		reqs[i] = segRequest{ID: i, Mapping: g.mapping(), Payload: g.message()}
	}
	// evfwd answers while node does.
	type answer struct {
		segAnswer
		refused bool
	}
	ours := make([]answer, n)
	done := make(chan time.Duration)
	go func() {
		start := time.Now()
		for i, r := range reqs {
			ours[i].segAnswer, ours[i].refused = evfwdAnswer(r.Mapping, r.Payload)
		}
		done <- time.Since(start)
	}()
	start := time.Now()
	answers := segment(t, reqs)
	segTime := time.Since(start)
	evTime := <-done
	var bad, refused, invalid, errs int
	for i, r := range reqs {
		ev, ref := ours[i].segAnswer, ours[i].refused
		if ref {
			refused++
			continue
		}
		seg := answers[i]
		switch {
		case seg.Validation:
			invalid++
		case seg.Error != "":
			errs++
		}
		if ok, why := agree(ev, seg); !ok {
			bad++
			if bad <= 10 {
				t.Errorf("pair %d disagrees: %s\n  mapping %s\n  message %s", i, why, r.Mapping, r.Payload)
			}
		}
	}
	t.Logf("%d pairs (%d refused on purpose, %d invalid mappings, %d Apply errors): node %v, evfwd %v, %d disagreements",
		n, refused, invalid, errs, segTime.Round(time.Millisecond), evTime.Round(time.Millisecond), bad)
	if bad > 0 {
		t.Errorf("%d of %d pairs disagree; seed %d (EVFWD_MAPPING_SEED=%d reproduces)", bad, n, seed, seed)
	}
}
