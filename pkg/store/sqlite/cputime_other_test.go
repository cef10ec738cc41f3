//go:build !unix

package sqlite_test

import "time"

// cpuTime is 0 where getrusage is not: cpu-µs/event reads 0.
func cpuTime() time.Duration { return 0 }
