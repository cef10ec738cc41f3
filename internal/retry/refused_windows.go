package retry

import "syscall"

// errConnRefused is WSAECONNREFUSED: Windows reports a closed port with
// its own code, not the syscall.ECONNREFUSED Go invents there.
const errConnRefused = syscall.Errno(10061)
