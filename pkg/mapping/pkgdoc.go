// Package mapping reshapes an event as Segment's Webhooks (Actions)
// destination does: a mapping is a JSON object whose values are JSON
// literals, nested objects and arrays of them, or directives, objects with
// one @-key, resolved against the message. Parse and Apply follow
// @segment/actions-core 3.170.0's mapping-kit (transform(mapping, payload))
// to the letter, checked against it by a differential test
// (EVFWD_SEGMENT_ENGINES).
//
// Directives: @path (get's rules: a.b, a[0], a["b"], a "$." dropped, a
// falsy value part way is the answer, strings and arrays have length and
// indexes), @template ({{path}} and {{{path}}}: undefined and null are "",
// objects "[object Object]", arrays joined with commas), @literal (which
// resolves what it holds), @if (exists: not undefined or null; blank: not
// == null and not == ” as JavaScript compares, so 0, false, "" and [] are
// blank; else only when truthy), @case (lower and upper on strings, other
// values as they are), @replace (pattern literal, global unless told,
// ignorecase, pattern2; $& $$ $` $' in the replacement), @json (encode as
// JSON.stringify; decode a string, left as it is when not JSON), @flatten
// (separator, omitArrays), @merge (Object.assign; "left" lets the first
// object win), @arrayPath ([path, shape]), @transform (apply, then mapping
// over its result), @excludeWhenNull, and the root key
// __segment_internal_directive. Members that resolve to undefined are left
// out; array elements that do are null.
//
// Refused: @liquid (Liquid templates); Parse names it. Parse also refuses
// what actions-core's validate refuses, with the path of the bad part
// (mapping.user.email.@path: should be a string or a mapping directive but
// it is a number). What actions-core only finds while resolving (a bad
// directive inside an array or a @literal, @if without exists or blank, a
// @replace pattern2 over 10 characters) is an Apply error, for every
// message, as Segment throws for every payload.
//
// Bytes are sacred: a value copied from the message (by @path, @arrayPath,
// @if...) is written as the message's own bytes, so 1.0 stays 1.0 and
// 12345678901234567890 keeps its digits where JavaScript writes 1 and
// 12345678901234567000; so does a number written in the mapping. That is
// the one deliberate difference from Segment's output. A value a directive
// computes (a template's text, a @json encoding, a @replace) is Segment's
// computed value exactly, numbers written as JavaScript writes them.
//
// Two more differences, at the edges of what JavaScript can hold: a path
// never finds a member objects inherit (constructor, __proto__, toString:
// evfwd reads own members only, where JavaScript returns functions and
// prototypes), and half a surrogate pair (a string indexed by UTF-16 code
// unit, a \ud800 in the message) is U+FFFD in evfwd's UTF-8 strings.
package mapping
