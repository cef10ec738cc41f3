// Package rawjson is evfwd's JSON toolkit, for the hot paths where
// encoding/json would decode what it only needs to carry:
//
//   - a single-pass validating scanner (ScanValue, ScanString, SkipSpace)
//     that accepts exactly what encoding/json accepts;
//   - Object, an object kept as its top-level members in order, each
//     value's bytes untouched, so numbers keep their digits and unknown
//     members survive an edit;
//   - an encoder for Go values (AppendValue, AppendString, AppendTime)
//     that needs no reflection for the common shapes and sorts map keys.
//
// It knows nothing about events; pkg/message builds the event model on it.
package rawjson
