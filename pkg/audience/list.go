package audience

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"

	"github.com/evfwd/evfwd/pkg/ndjson"
	"github.com/evfwd/evfwd/pkg/rawjson"
	"github.com/evfwd/evfwd/pkg/store"
)

// memberValue is the value of every audience member; one slice for all of
// them, which nothing writes to.
var memberValue = []byte("true")

// ErrList is matched by every error in a sync list (errors.Is).
var ErrList = errors.New("invalid sync list")

// ListError names the line (NDJSON) or element (JSON array) of a sync list
// that is wrong.
type ListError struct {
	Where  string // "line 3" or "element 3" (1-based)
	Reason string
}

func (e *ListError) Error() string { return e.Where + ": " + e.Reason }

// Is makes errors.Is(err, ErrList) true.
func (e *ListError) Is(target error) bool { return target == ErrList }

// MaxLine bounds one NDJSON line or array element of a list.
const MaxLine = 64 << 10

// Read streams the users of a sync list from r, holding one entry at a
// time. The list is NDJSON (one entry per line; blank lines skipped) or
// one JSON array; the first non-blank byte tells which. For an audience
// (traits false) an entry is a userId string or an object with "userId";
// each gets the value true. For a computed trait an entry is an object
// with "userId" and "value" (any JSON; a null value means the user has
// none, as if not listed). A Value's bytes are valid until the next
// entry. The sequence stops at the first bad entry with a *ListError.
func Read(r io.Reader, traits bool) iter.Seq2[store.Value, error] {
	return func(yield func(store.Value, error) bool) {
		br := bufio.NewReaderSize(r, 64<<10)
		first, err := firstByte(br)
		if err == io.EOF {
			return
		}
		if err != nil {
			yield(store.Value{}, err)
			return
		}
		if first == '[' {
			readArray(br, traits, yield)
			return
		}
		readLines(br, traits, yield)
	}
}

// AppendLine appends one line of a sync list file to dst as an NDJSON line
// Read takes, so that a client can stream a file to the admin API
// (admin.Client.Sync) line for line, and "line N" in an error is the
// file's line N. Spaces around the line are dropped. For an audience
// (traits false) a line that is neither a JSON string nor an object is a
// bare userId and becomes a JSON string; other lines, and every line of a
// trait list, are kept for Read to judge.
func AppendLine(dst, line []byte, traits bool) []byte {
	line = bytes.TrimSpace(line)
	if !traits && len(line) > 0 && line[0] != '{' && line[0] != '"' {
		return append(rawjson.AppendString(dst, string(line)), '\n')
	}
	return append(append(dst, line...), '\n')
}

func firstByte(br *bufio.Reader) (byte, error) {
	for {
		b, err := br.ReadByte()
		if err != nil {
			return 0, err
		}
		if !isSpace(b) {
			return b, br.UnreadByte()
		}
	}
}

func isSpace(b byte) bool { return b == ' ' || b == '\t' || b == '\r' || b == '\n' }

func readLines(r io.Reader, traits bool, yield func(store.Value, error) bool) {
	lr, err := ndjson.NewReader(r, "list", ndjson.Options{MaxLine: MaxLine})
	if err != nil {
		yield(store.Value{}, err)
		return
	}
	defer lr.Close()
	var e entry
	for lr.Next() {
		l := lr.Line()
		where := fmt.Sprintf("line %d", l.Num)
		if l.Err != nil {
			yield(store.Value{}, &ListError{Where: where, Reason: l.Err.Error()})
			return
		}
		line := bytes.TrimSpace(l.Bytes)
		if len(line) == 0 {
			continue
		}
		v, ok, err := e.parse(line, traits, where)
		if err != nil {
			yield(store.Value{}, err)
			return
		}
		if ok && !yield(v, nil) {
			return
		}
	}
	if err := lr.Err(); err != nil {
		yield(store.Value{}, err)
	}
}

func readArray(r io.Reader, traits bool, yield func(store.Value, error) bool) {
	dec := json.NewDecoder(r)
	dec.UseNumber()
	if _, err := dec.Token(); err != nil { // the '['
		yield(store.Value{}, &ListError{Where: "element 1", Reason: err.Error()})
		return
	}
	var e entry
	var raw json.RawMessage
	for n := 1; dec.More(); n++ {
		where := fmt.Sprintf("element %d", n)
		raw = raw[:0]
		if err := dec.Decode(&raw); err != nil {
			yield(store.Value{}, &ListError{Where: where, Reason: err.Error()})
			return
		}
		if len(raw) > MaxLine {
			yield(store.Value{}, &ListError{Where: where, Reason: fmt.Sprintf("is %d bytes, over the %d byte limit", len(raw), MaxLine)})
			return
		}
		v, ok, err := e.parse(raw, traits, where)
		if err != nil {
			yield(store.Value{}, err)
			return
		}
		if ok && !yield(v, nil) {
			return
		}
	}
	if _, err := dec.Token(); err != nil { // the ']'
		yield(store.Value{}, &ListError{Where: "end of array", Reason: err.Error()})
		return
	}
	if _, err := dec.Token(); err != io.EOF {
		yield(store.Value{}, &ListError{Where: "after the array", Reason: "unexpected data"})
	}
}

// entry decodes entries, reusing its buffers.
type entry struct {
	obj struct {
		UserID *string         `json:"userId"`
		Value  json.RawMessage `json:"value"` // "null" for null, empty when absent
	}
	value bytes.Buffer
}

// parse decodes one entry; ok is false for a trait entry without a value.
func (e *entry) parse(b []byte, traits bool, where string) (v store.Value, ok bool, err error) {
	bad := func(reason string) (store.Value, bool, error) {
		return store.Value{}, false, &ListError{Where: where, Reason: reason}
	}
	if b[0] == '"' && !traits {
		var id string
		if err := json.Unmarshal(b, &id); err != nil {
			return bad(err.Error())
		}
		return checkID(id, memberValue, where)
	}
	if b[0] != '{' {
		if traits {
			return bad(`want an object {"userId": ..., "value": ...}`)
		}
		return bad(`want a userId string or an object {"userId": ...}`)
	}
	e.obj.UserID, e.obj.Value = nil, e.obj.Value[:0]
	if err := json.Unmarshal(b, &e.obj); err != nil {
		return bad(err.Error())
	}
	if e.obj.UserID == nil {
		return bad("userId is required (a string)")
	}
	if !traits {
		return checkID(*e.obj.UserID, memberValue, where)
	}
	if len(e.obj.Value) == 0 {
		return bad("value is required")
	}
	e.value.Reset()
	if err := json.Compact(&e.value, e.obj.Value); err != nil {
		return bad("value: " + err.Error())
	}
	if bytes.Equal(e.value.Bytes(), []byte("null")) {
		return store.Value{}, false, nil
	}
	return checkID(*e.obj.UserID, e.value.Bytes(), where)
}

func checkID(id string, value []byte, where string) (store.Value, bool, error) {
	if id == "" {
		return store.Value{}, false, &ListError{Where: where, Reason: "userId is empty"}
	}
	return store.Value{UserID: id, Value: value}, true, nil
}
