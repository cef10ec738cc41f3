//go:build !windows

package retry

import "syscall"

// errConnRefused is the dial error of a port nobody listens on.
const errConnRefused = syscall.ECONNREFUSED
