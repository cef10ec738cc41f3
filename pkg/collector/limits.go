package collector

// Body limits (DESIGN §2).
//
// Segment documents 32 KB per message and 500 KB per batch request. Its own
// libraries do not all keep to the letter of those figures, and a batch one
// of them builds at its own caps must not be refused: the client would drop
// it (none retries a 4xx). Each library's rule, read from its source (the
// tests in clients_test.go rebuild each one's largest body byte for byte):
//
//   - analytics-ruby 2.4 (message_batch.rb, transport.rb): a message's
//     to_json is at most 32,768 bytes; messages are added, each counting
//     its bytes plus one for a comma, until the count reaches 479,232
//     (512,000 − 32,768), so up to 512,000 bytes of messages and commas,
//     then wrapped as {"sentAt":"<32-byte time>","batch":[...]}: 512,055
//     bytes, the largest of the four.
//   - analytics-python 2.3 (consumer.py, request.py): a message's
//     json.dumps (", " and ": " separators, \u escapes) is at most 32,768
//     bytes; items are taken until their sizes sum to 475,000 or more
//     (at most 507,767) or upload_size (100) is reached, then
//     {"batch": [...], "sentAt": "...", "writeKey": "..."}: 508,072 bytes
//     with a 32-character write key (at most 512,326 at any upload_size).
//   - analytics-go v3.3 (message.go, analytics.go): a message's
//     json.Marshal is at most 32,000 bytes; the batch keeps the sum of its
//     messages plus one under 500,000 minus its envelope, measured with the
//     sentAt of the client's start, and holds at most 250 messages:
//     500,256 bytes when the sentAt sent is ten bytes longer than the one
//     measured.
//   - analytics-node 2.x and 3.x (context-batch.ts, publisher.ts): an event
//     is at most 32 KiB and a batch 480 KiB as it counts them:
//     encodeURI(JSON.stringify(event)).split(/%..|i/).length, the bytes
//     encodeURI escapes plus each letter "i", not the event's bytes. An
//     event whose payload it counts in full (text outside ASCII) is 32,768
//     counted bytes plus the ASCII it does not count, 32,991 bytes for its
//     smallest track; 15 of them (flushAt) make a body of 494,983 bytes. An
//     event of ASCII text is barely counted at all (100,000 bytes of
//     properties count as 92): those are over Segment's limits and refused
//     here as there.
//
// MaxBatchBytes is the smallest whole KiB above the largest of these,
// analytics-ruby's 512,055 bytes: 501 KiB, 513,024 bytes, 969 bytes to
// spare. MaxMessageBytes admits analytics-node's event at its own 32 KiB
// with up to 1 KiB of what it leaves uncounted; the other libraries' largest
// messages are 32,768 bytes as sent. Both limits apply to the JSON as sent
// (for gzip, once inflated); a message is measured as it stands in the
// batch. A gzip body may also be up to GzipSlack larger than the limit on
// the wire, for incompressible JSON and the gzip header: a compressed body
// is bounded both as sent and inflated, so a small gzip bomb is refused
// once MaxBatchBytes have inflated.
const (
	MaxBatchBytes   = 501 << 10
	MaxMessageBytes = 33 << 10
	// GzipSlack is how much larger than its limit a gzip body may be as
	// sent. Deflate stores what it cannot compress in blocks of up to 64
	// KiB at 5 bytes each (zlib bounds its output at n + n/4096 + n/16384
	// + 25 for gzip), and the gzip header may carry a file name.
	GzipSlack = 4 << 10
)

// RetryAfterFull is what a 503 for a full store asks the client to wait,
// in seconds: freeing disk space is an operator's job, not a moment's.
const RetryAfterFull = 30
