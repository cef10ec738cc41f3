//go:build !windows

package analytics

import "syscall"

// errConnRefused is the dial error of a port nobody listens on.
const errConnRefused = syscall.ECONNREFUSED
