package analytics

import (
	"fmt"
	"time"

	"github.com/evfwd/evfwd/pkg/message"
)

// A request body is {"batch":[m1,m2,...],"sentAt":"2024-05-01T12:00:00.123Z"}:
// bodyHead, the encoded messages joined by commas, then appendTail.
const (
	bodyHead = `{"batch":[`
	// bodyTail is as long as every tail appendTail writes.
	bodyTail = `],"sentAt":"` + "2024-05-01T12:00:00.123Z" + `"}`
)

// appendTail closes a body after its last message, stamped with sentAt.
func appendTail(b []byte, sentAt time.Time) []byte {
	b = append(b, `],"sentAt":"`...)
	b = message.AppendTime(b, sentAt)
	return append(b, `"}`...)
}

// encodeOptions are how a client of version encodes every message.
func encodeOptions(version string) message.EncodeOptions {
	return message.EncodeOptions{Library: message.LibraryJSON(LibraryName, version)}
}

// BatchBody returns the exact request body a client of version ("" means
// the default, as in Config.Version) sends for msgs in one attempt at
// sentAt, so a caller can show a request without sending it. Messages are
// taken as they are: a client fills in a missing messageId and timestamp
// before encoding. An error is what the client would refuse the message
// with, or a body over MaxBatchBytes.
func BatchBody(version string, sentAt time.Time, msgs ...*message.Raw) ([]byte, error) {
	if version == "" {
		version = defaultVersion()
	}
	enc := encodeOptions(version)
	b := []byte(bodyHead)
	for i, m := range msgs {
		if i > 0 {
			b = append(b, ',')
		}
		if err := m.Validate(); err != nil {
			return nil, err
		}
		start := len(b)
		var err error
		if b, err = m.AppendJSON(b, &enc); err != nil {
			return nil, err
		}
		if err := message.CheckSize(len(b) - start); err != nil {
			return nil, err
		}
	}
	b = appendTail(b, sentAt)
	if len(b) > MaxBatchBytes {
		return nil, fmt.Errorf("analytics: batch body is %d bytes, over the %d-byte limit", len(b), MaxBatchBytes)
	}
	return b, nil
}
