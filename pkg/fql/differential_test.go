package fql

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/evfwd/evfwd/internal/testsize"
	"github.com/google/go-cmp/cmp"
)

// engineEnv names the directory whose node_modules holds Segment's
// @segment/destination-subscriptions (CI installs it; see .ci/run).
const engineEnv = "EVFWD_SEGMENT_ENGINES"

// seedEnv varies the differential test's seed.
const seedEnv = "EVFWD_FQL_SEED"

// segment is Segment's engine in a node process, behind a pipe.
type segment struct {
	cmd *exec.Cmd
	in  *bufio.Writer
	out *bufio.Scanner
}

func startSegment(t *testing.T) *segment {
	t.Helper()
	dir := os.Getenv(engineEnv)
	if dir == "" {
		t.Skip(engineEnv + " is not set: Segment's engine is not installed")
	}
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatalf("%s is set but node is not on PATH: %v", engineEnv, err)
	}
	cmd := exec.Command(node, filepath.Join("testdata", "segment.cjs"), dir)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s := &segment{cmd: cmd, in: bufio.NewWriterSize(stdin, 1<<16), out: bufio.NewScanner(stdout)}
	s.out.Buffer(make([]byte, 1<<20), 1<<26)
	t.Cleanup(func() {
		stdin.Close()
		cmd.Wait()
	})
	return s
}

// send writes requests from another goroutine (so that neither side waits
// on a full pipe) and reads one answer per request into answers[i].
func (s *segment) roundTrip(t *testing.T, reqs []any, answers []any) {
	t.Helper()
	errc := make(chan error, 1)
	go func() {
		enc := json.NewEncoder(s.in)
		enc.SetEscapeHTML(false)
		for _, r := range reqs {
			if err := enc.Encode(r); err != nil {
				errc <- err
				return
			}
		}
		errc <- s.in.Flush()
	}()
	for i := range reqs {
		if !s.out.Scan() {
			t.Fatalf("node stopped answering: %v", s.out.Err())
		}
		if err := json.Unmarshal(s.out.Bytes(), answers[i]); err != nil {
			t.Fatalf("answer %q: %v", s.out.Bytes(), err)
		}
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
}

type decision struct {
	Parsed  bool   `json:"parsed"`
	Error   string `json:"error"`
	AST     any    `json:"ast"`
	Results []any  `json:"results"`
}

// jsTree is the port's tree as JSON.stringify writes Segment's: undefined
// children as null, NaN and the infinities as null.
func jsTree(n *node) any {
	if n == nil {
		return nil
	}
	if n.group {
		kids := []any{}
		for _, k := range n.kids {
			kids = append(kids, jsTree(k))
		}
		return map[string]any{"type": "group", "operator": n.op, "children": kids}
	}
	m := map[string]any{"type": n.field, "operator": n.op}
	if _, ok := pathPrefix[n.field]; ok {
		m["name"] = n.name
	}
	if !n.noVal {
		switch n.val.kind {
		case 's':
			m["value"] = n.val.s
		case 'b':
			m["value"] = n.val.b
		case 'n':
			if math.IsNaN(n.val.n) || math.IsInf(n.val.n, 0) {
				m["value"] = nil
			} else {
				m["value"] = n.val.n
			}
		}
	}
	return m
}

// checkPort holds the port of Segment's lexer and parser to theirs: the
// same acceptance, the same tree.
func checkPort(t *testing.T, src string, d *decision) {
	t.Helper()
	if !utf8.ValidString(src) {
		return
	}
	toks, err := lexSegment(toUnits(src))
	var tree *node
	if err == nil {
		tree, err = segmentParse(toks)
	}
	if (err == nil) != d.Parsed {
		t.Errorf("port of parseFql(%q): error %v; Segment's: parsed %v (%s)", src, err, d.Parsed, d.Error)
		return
	}
	if err != nil {
		return
	}
	b, _ := json.Marshal(jsTree(tree))
	var got any
	json.Unmarshal(b, &got)
	if diff := cmp.Diff(d.AST, got); diff != "" {
		t.Errorf("port of parseFql(%q) mismatch (-Segment +port):\n%s", src, diff)
	}
}

func seed(t *testing.T) uint64 {
	if s := os.Getenv(seedEnv); s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("%s=%q: %v", seedEnv, s, err)
		}
		return n
	}
	return 1
}

// TestDifferential decides random conditions on random messages with
// evfwd and with Segment's engine and requires the same answers: the
// same acceptance (but for the conditions evfwd refuses on purpose, which
// Segment's parser must accept) and, for every accepted condition, the same
// decision on every message.
func TestDifferential(t *testing.T) {
	seg := startSegment(t)
	sd := seed(t)
	t.Logf("seed %d (%s=%d to repeat)", sd, seedEnv, sd)
	defer func() {
		if t.Failed() {
			t.Logf("failed with seed %d: rerun with %s=%d", sd, seedEnv, sd)
		}
	}()
	r := rand.New(rand.NewPCG(sd, 0xf91))

	checkPrototypes(t, seg)

	// Chunks of 50 conditions decided on the same 60 messages.
	chunks := 130 // about 125,000 pairs; 35 s under -race on two cores
	const condsPer, msgsPer = 50, 60
	matchEvery := testsize.Pick(1, 4)
	start := time.Now()
	var pairs, accepted, quirks, refused, segRefused, fromTrees, treesAccepted int
	for range chunks {
		msgs := make([]string, msgsPer)
		for i := range msgs {
			msgs[i] = genMessage(r)
		}
		// Half the conditions are trees Segment's UI would build, turned
		// into text by Segment's own generateFql; half are raw text.
		texts := make([]string, 0, condsPer)
		var gen []any
		for range condsPer / 2 {
			gen = append(gen, map[string]any{"op": "generate", "ast": genAST(r, 1)})
		}
		genAnswers := make([]any, len(gen))
		for i := range genAnswers {
			genAnswers[i] = &struct{ FQL, Error string }{}
		}
		seg.roundTrip(t, gen, genAnswers)
		for _, a := range genAnswers {
			if g := a.(*struct{ FQL, Error string }); g.Error == "" {
				texts = append(texts, g.FQL)
			}
		}
		nTrees := len(texts)
		fromTrees += nTrees
		for len(texts) < condsPer {
			texts = append(texts, genText(r))
		}

		reqs := []any{map[string]any{"op": "messages", "messages": msgs}}
		answers := []any{&struct{ OK bool }{}}
		for _, s := range texts {
			reqs = append(reqs, map[string]any{"op": "decide", "fql": s})
			answers = append(answers, &decision{})
		}
		seg.roundTrip(t, reqs, answers)

		var conds []*Condition
		var want [][]bool
		for i, src := range texts {
			d := answers[i+1].(*decision)
			if !d.Parsed {
				segRefused++
			}
			checkPort(t, src, d)
			c, err := Parse(src)
			if blank(src) {
				continue // evfwd: every message; Segment: an error
			}
			var se *SyntaxError
			switch {
			case err != nil && !errors.As(err, &se):
				t.Errorf("Parse(%q): error %v is not a *SyntaxError", src, err)
			case err != nil && se.Quirk:
				quirks++
				if !d.Parsed {
					t.Errorf("Parse(%q) refuses it as a quirk (%v), but Segment's parser refuses it too (%s): that is a syntax error", src, err, d.Error)
				}
			case err != nil:
				refused++
				if strings.Contains(se.Msg, "Segment's parser refuses this condition") {
					// check.go's grammar accepted what Segment's parser refuses:
					// refused all the same, but with no column or reason.
					t.Logf("Parse(%q): refused only by the port of Segment's parser", src)
				}
				if d.Parsed {
					t.Errorf("Parse(%q) = syntax error %v, but Segment's parser accepts it", src, err)
				}
			case !d.Parsed:
				t.Errorf("Parse(%q) accepts it, Segment's parser refuses it: %s", src, d.Error)
			default:
				accepted++
				if i < nTrees {
					treesAccepted++
				}
				row := make([]bool, len(msgs))
				for j, m := range msgs {
					pairs++
					w, ok := d.Results[j].(bool)
					if !ok {
						t.Errorf("Parse(%q) accepts a condition Segment's validate fails on (%v) with message %s", src, d.Results[j], m)
						continue
					}
					row[j] = w
					// Set.Decide below decides every pair; Match, the same
					// code with a trie of its own, every fourth under -race.
					if j%matchEvery != 0 {
						continue
					}
					if got := c.Match([]byte(m)); got != w {
						t.Errorf("Match(%q) = %v, Segment %v, message %s", src, got, w, m)
					}
				}
				conds = append(conds, c)
				want = append(want, row)
			}
			if t.Failed() && pairs > 0 {
				break
			}
		}
		// The same conditions decided together.
		set := NewSet(conds)
		out := make([]bool, len(conds))
		for j, m := range msgs {
			set.Decide([]byte(m), out)
			for i := range conds {
				if out[i] != want[i][j] {
					t.Errorf("Set.Decide: condition %q on %s = %v, Segment %v", conds[i], m, out[i], want[i][j])
				}
			}
		}
		if t.Failed() {
			return
		}
	}
	t.Logf("%d conditions written by generateFql, %d of them accepted", fromTrees, treesAccepted)
	t.Logf("%d conditions: %d accepted, %d refused as Segment refuses them, %d refused as quirks Segment accepts (Segment refused %d); %d (condition, message) pairs decided alike in %v",
		chunks*condsPer, accepted, refused, quirks, segRefused, pairs, time.Since(start).Round(time.Millisecond))
	if min := 100000; pairs < min {
		t.Errorf("only %d pairs compared, want %d at least", pairs, min)
	}
}

// checkPrototypes holds the names check.go refuses in paths to what node
// finds on the prototypes.
func checkPrototypes(t *testing.T, seg *segment) {
	var protos map[string][]string
	seg.roundTrip(t, []any{map[string]string{"op": "prototypes"}}, []any{&protos})
	var all []string
	for _, names := range protos {
		for _, n := range names {
			if n != "length" && !slices.Contains(all, n) {
				all = append(all, n)
			}
		}
	}
	for _, n := range all {
		if !builtinNames[n] {
			t.Errorf("node's prototypes have %q, builtinNames does not", n)
		}
	}
	if len(all) != len(builtinNames) {
		t.Errorf("builtinNames has %d names, node's prototypes %d", len(builtinNames), len(all))
	}
	for n := range objectPrototype {
		if !slices.Contains(protos["Object"], n) {
			t.Errorf("objectPrototype has %q, Object.prototype does not", n)
		}
	}
	if len(objectPrototype) != len(protos["Object"]) {
		t.Errorf("objectPrototype has %d names, Object.prototype %d", len(objectPrototype), len(protos["Object"]))
	}
	_ = fmt.Sprint()
}

// TestSegmentCasesAgainstNode asks Segment's engine the table tests'
// questions again: the decisions segmentCases holds, and whether its
// parser accepts each of refusals (it must accept exactly the quirks).
func TestSegmentCasesAgainstNode(t *testing.T) {
	seg := startSegment(t)
	for _, tc := range segmentCases {
		var d decision
		seg.roundTrip(t, []any{
			map[string]any{"op": "messages", "messages": []string{tc.msg}},
			map[string]any{"op": "decide", "fql": tc.cond},
		}, []any{&struct{ OK bool }{}, &d})
		if len(d.Results) != 1 || d.Results[0] != tc.want {
			t.Errorf("Segment decides %q on %s: %v (parsed %v), the table says %v", tc.cond, tc.msg, d.Results, d.Parsed, tc.want)
		}
	}
	for _, tc := range refusals {
		if !utf8.ValidString(tc.cond) {
			continue // not a JavaScript string
		}
		var d decision
		seg.roundTrip(t, []any{map[string]any{"op": "decide", "fql": tc.cond}}, []any{&d})
		if d.Parsed != tc.quirk {
			t.Errorf("Segment's parser on %q: parsed %v, the table says quirk %v", tc.cond, d.Parsed, tc.quirk)
		}
	}
}
