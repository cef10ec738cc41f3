package ndjson

import (
	"bytes"
	"compress/gzip"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

type got struct {
	Num   int64
	Bytes string
	Err   string
}

func readAll(t *testing.T, r *Reader) []got {
	t.Helper()
	var out []got
	for r.Next() {
		l := r.Line()
		g := got{Num: l.Num, Bytes: string(l.Bytes)}
		if l.Err != nil {
			g.Err = l.Err.Error()
		}
		out = append(out, g)
	}
	if err := r.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestLines(t *testing.T) {
	long := strings.Repeat("x", 100)
	tests := []struct {
		name, in string
		max      int
		want     []got
	}{
		{"empty", "", 0, nil},
		{"no final newline", "a\nb", 0, []got{{1, "a", ""}, {2, "b", ""}}},
		{"final newline", "a\nb\n", 0, []got{{1, "a", ""}, {2, "b", ""}}},
		{"blank lines kept", "a\n\n  \nb\n", 0, []got{{1, "a", ""}, {2, "", ""}, {3, "  ", ""}, {4, "b", ""}}},
		{"crlf", "a\r\nb\r\n", 0, []got{{1, "a", ""}, {2, "b", ""}}},
		{"exact bytes", `{"n":12345678901234567890.000000001, "x" : [1 ,2]}` + "\n", 0,
			[]got{{1, `{"n":12345678901234567890.000000001, "x" : [1 ,2]}`, ""}}},
		{"at limit", long + "\n", 100, []got{{1, long, ""}}},
		{"over limit, skipped", "a\n" + long + "y\nb\n", 100,
			[]got{{1, "a", ""}, {2, "", "line is 101 bytes, over the 100-byte read limit"}, {3, "b", ""}}},
		{"over limit at end", "a\n" + long + "y", 100,
			[]got{{1, "a", ""}, {2, "", "line is 101 bytes, over the 100-byte read limit"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := NewReader(strings.NewReader(tt.in), "in", Options{MaxLine: tt.max})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, readAll(t, r)); diff != "" {
				t.Errorf("mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// Lines longer than the internal buffer are assembled whole, and lines far
// over the limit are discarded without being held.
func TestLongLines(t *testing.T) {
	big := strings.Repeat("a", 200<<10)
	huge := strings.Repeat("b", 3<<20)
	in := big + "\n" + huge + "\nend\n"
	r, _ := NewReader(strings.NewReader(in), "in", Options{MaxLine: 1 << 20})
	lines := readAll(t, r)
	want := []got{{1, big, ""}, {2, "", "line is 3145728 bytes, over the 1048576-byte read limit"}, {3, "end", ""}}
	if diff := cmp.Diff(want, lines); diff != "" {
		t.Errorf("mismatch (-want +got):\n%.400s", diff)
	}
	if cap(r.long) > 2<<20 {
		t.Errorf("held %d bytes for an over-long line", cap(r.long))
	}
}

func gz(t *testing.T, s string) []byte {
	var b bytes.Buffer
	w := gzip.NewWriter(&b)
	w.Write([]byte(s))
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func TestGzip(t *testing.T) {
	data := gz(t, "a\nb\n")
	for _, name := range []string{"events.ndjson.gz", "stdin"} { // by name, by magic bytes
		r, err := NewReader(bytes.NewReader(data), name, Options{})
		if err != nil {
			t.Fatal(err)
		}
		if !r.Compressed() {
			t.Errorf("%s: not detected as gzip", name)
		}
		if diff := cmp.Diff([]got{{1, "a", ""}, {2, "b", ""}}, readAll(t, r)); diff != "" {
			t.Errorf("%s mismatch (-want +got):\n%s", name, diff)
		}
		if r.Offset() != int64(len(data)) {
			t.Errorf("Offset = %d, want %d", r.Offset(), len(data))
		}
	}
	if _, err := NewReader(strings.NewReader("plain"), "x.gz", Options{}); err == nil {
		t.Error("a .gz name over plain text: no error")
	}
}

func TestCorruptGzip(t *testing.T) {
	data := gz(t, strings.Repeat("line\n", 10000))
	data = data[:len(data)/2]
	r, err := NewReader(bytes.NewReader(data), "x.gz", Options{})
	if err != nil {
		t.Fatal(err)
	}
	for r.Next() {
	}
	if err := r.Err(); err == nil || !errors.Is(err, io.ErrUnexpectedEOF) || !strings.HasPrefix(err.Error(), "x.gz:") {
		t.Errorf("Err = %v, want x.gz:N: unexpected EOF", err)
	}
}

func TestPos(t *testing.T) {
	r, _ := NewReader(strings.NewReader("a\nb\n"), "events.ndjson", Options{})
	r.Next()
	r.Next()
	if got := r.Line().Pos(); got != "events.ndjson:2" {
		t.Errorf("Pos = %q", got)
	}
}

func FuzzReader(f *testing.F) {
	f.Add([]byte("a\nb\r\n\nc"), 4)
	f.Add([]byte("xxxxxxxx\ny"), 3)
	f.Fuzz(func(t *testing.T, data []byte, max int) {
		if max <= 0 || max > 1<<16 || bytes.HasPrefix(data, gzipMagic) {
			return
		}
		r, err := NewReader(bytes.NewReader(data), "f", Options{MaxLine: max})
		if err != nil {
			return
		}
		var n int64
		for r.Next() {
			l := r.Line()
			n++
			if l.Num != n {
				t.Fatalf("line %d numbered %d", n, l.Num)
			}
			if l.Err == nil && (len(l.Bytes) > max || bytes.ContainsRune(l.Bytes, '\n')) {
				t.Fatalf("line %d: %q", n, l.Bytes)
			}
		}
		if r.Err() != nil {
			t.Fatal(r.Err())
		}
		if want := int64(bytes.Count(data, []byte("\n"))); n != want && n != want+1 {
			t.Fatalf("%d lines for %d newlines", n, want)
		}
	})
}

// TestDecoded: Decoded counts the NDJSON's bytes, gzip undone, where
// Offset counts the input's.
func TestDecoded(t *testing.T) {
	text := strings.Repeat(`{"type":"track","event":"E"}`+"\n", 500)
	var gz bytes.Buffer
	w := gzip.NewWriter(&gz)
	w.Write([]byte(text))
	w.Close()
	for _, in := range [][]byte{[]byte(text), gz.Bytes()} {
		r, err := NewReader(bytes.NewReader(in), "in", Options{})
		if err != nil {
			t.Fatal(err)
		}
		for r.Next() {
		}
		if r.Decoded() != int64(len(text)) || r.Offset() != int64(len(in)) {
			t.Errorf("compressed %v: Decoded %d, Offset %d; want %d, %d", r.Compressed(), r.Decoded(), r.Offset(), len(text), len(in))
		}
	}
}
