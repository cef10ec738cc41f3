// Package ndjson streams newline-delimited JSON (or any line-oriented text)
// one line at a time, with the file name and line number of each line, in
// constant memory. Input compressed with gzip is decompressed on the fly,
// recognised by a .gz name or by its magic bytes. Lines keep their exact
// bytes; only the line terminator ("\n", and "\r" before it) is removed.
package ndjson

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync/atomic"
)

// DefaultMaxLine bounds a line when Options.MaxLine is zero.
const DefaultMaxLine = 1 << 20

// Options tune a Reader. Zero values mean the defaults.
type Options struct {
	// MaxLine is the longest line returned whole, in bytes. A longer line
	// is skipped (read and discarded, never held) and reported as a
	// *LineTooLongError on that line.
	MaxLine int
}

// Line is one line of input. Bytes is valid until the next call to Next.
type Line struct {
	File  string // name given to NewReader
	Num   int64  // 1-based line number within File
	Bytes []byte // without the terminator; nil when Err is set
	Err   error  // *LineTooLongError for a line over MaxLine
}

// Pos is "FILE:LINE", how errors name a line.
func (l *Line) Pos() string { return fmt.Sprintf("%s:%d", l.File, l.Num) }

// LineTooLongError reports a line over Options.MaxLine.
type LineTooLongError struct {
	Size  int64 // the line's full length
	Limit int
}

func (e *LineTooLongError) Error() string {
	return fmt.Sprintf("line is %d bytes, over the %d-byte read limit", e.Size, e.Limit)
}

// Reader yields the lines of one input.
type Reader struct {
	name    string
	max     int
	counted *countingReader
	decoded *countingReader // the NDJSON: counted for plain input, after gunzip for gzip
	br      *bufio.Reader
	gz      *gzip.Reader
	long    []byte // assembles lines longer than br's buffer
	line    Line
	err     error
}

// gzipMagic starts every gzip stream (RFC 1952).
var gzipMagic = []byte{0x1f, 0x8b}

// NewReader reads r, called name in every Line. It decompresses gzip when
// name ends in .gz or the data starts with the gzip magic bytes; a corrupt
// gzip header is an error here, corruption later an error from Err.
func NewReader(r io.Reader, name string, opts Options) (*Reader, error) {
	if opts.MaxLine <= 0 {
		opts.MaxLine = DefaultMaxLine
	}
	cr := &countingReader{r: r}
	rd := &Reader{name: name, max: opts.MaxLine, counted: cr, decoded: cr}
	br := bufio.NewReaderSize(cr, 64<<10)
	head, _ := br.Peek(len(gzipMagic))
	if strings.HasSuffix(name, ".gz") || bytes.Equal(head, gzipMagic) {
		gz, err := gzip.NewReader(br)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		rd.gz = gz
		rd.decoded = &countingReader{r: gz}
		br = bufio.NewReaderSize(rd.decoded, 64<<10)
	}
	rd.br = br
	return rd, nil
}

// Compressed reports whether the input is gzip.
func (r *Reader) Compressed() bool { return r.gz != nil }

// Offset is how many bytes of the underlying input (compressed bytes for
// gzip) have been consumed so far, read-ahead included: progress against a
// file's size.
// Safe to call from another goroutine (a progress display).
func (r *Reader) Offset() int64 { return r.counted.n.Load() }

// Decoded is how many bytes of NDJSON have been read so far, read-ahead
// included: Offset for plain input, the decompressed bytes for gzip. Safe
// to call from another goroutine.
func (r *Reader) Decoded() int64 { return r.decoded.n.Load() }

// Next advances to the next line; false at the end of input or on a read
// error (see Err).
func (r *Reader) Next() bool {
	if r.err != nil {
		return false
	}
	r.line = Line{File: r.name, Num: r.line.Num + 1}
	r.long = r.long[:0]
	var size int64
	tooLong := false
	for {
		chunk, err := r.br.ReadSlice('\n')
		size += int64(len(chunk))
		switch {
		case tooLong:
			// discarding the rest of an over-long line
		case size > int64(r.max)+2: // +2: "\r\n" does not count; checked exactly below
			tooLong = true
			r.long = r.long[:0]
		case err == bufio.ErrBufferFull || len(r.long) > 0:
			r.long = append(r.long, chunk...)
		}
		if err == bufio.ErrBufferFull {
			continue
		}
		if err != nil && err != io.EOF {
			r.err = fmt.Errorf("%s:%d: %w", r.name, r.line.Num, err)
			return false
		}
		if err == io.EOF && size == 0 {
			r.err = io.EOF
			return false
		}
		b := chunk
		if len(r.long) > 0 {
			b = r.long
		}
		if err == io.EOF {
			// A last line without a terminator is still a line; the next
			// call ends the input.
			r.err = io.EOF
		}
		b = trimEOL(b)
		if tooLong || len(b) > r.max {
			r.line.Err = &LineTooLongError{Size: size - eolLen(chunk), Limit: r.max}
			return true
		}
		r.line.Bytes = b
		return true
	}
}

// Line is the current line.
func (r *Reader) Line() *Line { return &r.line }

// Err is the error that ended Next, nil at a clean end of input.
func (r *Reader) Err() error {
	if errors.Is(r.err, io.EOF) {
		return nil
	}
	return r.err
}

// Close releases the gzip reader; it does not close the underlying input.
func (r *Reader) Close() error {
	if r.gz != nil {
		return r.gz.Close()
	}
	return nil
}

func trimEOL(b []byte) []byte {
	return b[:len(b)-int(eolLen(b))]
}

func eolLen(b []byte) int64 {
	switch {
	case bytes.HasSuffix(b, []byte("\r\n")):
		return 2
	case bytes.HasSuffix(b, []byte("\n")):
		return 1
	}
	return 0
}

// countingReader counts the bytes read through it.
type countingReader struct {
	r io.Reader
	n atomic.Int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n.Add(int64(n))
	return n, err
}
