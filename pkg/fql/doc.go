// Package fql decides Segment's subscription conditions ("FQL", the trigger
// of a Webhooks (Actions) subscription or a destination filter) exactly as
// Segment's own engine does: @segment/destination-subscriptions 3.37.0,
// whose parseFql reads the text with @segment/fql-ts 1.10.1's lexer and
// whose validate decides a message.
//
//	type = "track" and event = "Order Completed"
//	(type = "track" or type = "page") and properties.total > 100
//	match(event, "Order *") and !contains(context.page.url, "/checkout")
//
// # What a condition reads
//
// A comparison names a field: type, event, name or userId (the message's
// own, with no path below them), or a path below properties, traits or
// context (context.page.url; traits are the message's top-level traits).
// A path is keys joined by dots; a key that is not letters, digits, _ and -
// escapes its other characters with a backslash (properties.first\ name);
// a key that starts with a digit or - escapes its first character
// (properties.items.\0.sku reads the first item). As in Segment's engine,
// length reads an array's length or a string's (in UTF-16 code units), an
// index reads an array's element or one code unit of a string, and a path
// that meets a falsy value (0, "", false, null) on its way answers that
// value (with properties.a = 0, properties.a.b = 0 holds). Of duplicate
// keys the last one counts, as in JSON.parse.
//
// # How values compare
//
//   - = "text" and != "text" compare strings: = holds for a string equal to
//     the text, != for anything else (a number, a missing field).
//   - = 5 and != 5 compare numbers, as float64 (JavaScript's numbers, so
//     9007199254740993 is 9007199254740992); both hold only for numbers.
//     <, <=, > and >= likewise; on type, event, name and userId too.
//   - = true and = false hold for those booleans only.
//   - = null holds for null or a missing field, != null for any other value.
//   - contains(f, "t"), match(f, "prefix*") and match(f, "*suffix") hold for
//     strings only; their negations (!contains, !match) too, so they do not
//     hold for a missing field.
//   - and / or, and one level of parentheses.
//
// A blank condition matches every message (Segment's parser refuses it).
// Set decides many conditions in one pass over a message's raw JSON; a
// message that is not one valid JSON object matches no condition but the
// blank ones. Two limits differ from node's: nesting deeper than 10,000
// levels makes a message invalid (as for encoding/json), and bytes that are
// not UTF-8 in a message's strings are compared as they are, where a
// JavaScript decoder would have replaced them with U+FFFD first.
//
// # What Parse refuses
//
// Parse refuses what Segment's parser refuses (SyntaxError.Quirk false).
// It also refuses, with Quirk true and a message saying how to write it
// instead, the conditions Segment's parser accepts but decides against
// their plain meaning, rather than copy the quirk or decide otherwise than
// Segment would:
//
//   - ! before parentheses or a comparison, which Segment ignores
//     (!(type = "page") is type = "page");
//   - and mixed with or at one level, where Segment applies the last one
//     to the whole level; terms with no and / or between them (Segment:
//     and); a leading and / or; AND, OR, "and(" (field names to Segment);
//   - unknown fields, and fields Segment reads otherwise: event.x (event),
//     properties alone (properties.properties), contains() or match() on
//     type (skipped), keys named like JavaScript built-ins (constructor,
//     toString, map, ...), escaped . [ ] (Segment splits keys there), a key
//     starting with a digit left unescaped;
//   - values Segment converts: = 5, = true or = null on type, event, name
//     or userId (compared with the text "5", "true", "null"), != true and
//     != false (which hold for true and false), <, <=, >, >= with anything
//     but a number, single-quoted text (the quotes stay in it), bare words,
//     "-" or "+" alone, "<=5" without a space (read as < "="), a number in
//     contains() or match();
//   - match() patterns other than one leading or trailing * (Segment drops
//     the first character of a pattern without one, and takes *, ?, [ and ]
//     literally elsewhere);
//   - empty parentheses (Segment's validate fails on them), an unbalanced
//     ), a function call with no ) and stray tokens, which Segment skips.
package fql
