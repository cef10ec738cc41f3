package inspector

import "github.com/evfwd/evfwd/internal/lockout"

// LoginAddrs is how many client addresses s keeps failed logins of, for
// the tests of package inspector_test.
func LoginAddrs(s *Serve) int { return s.limit.Len() }

// MaxLoginAddrs is the bound of LoginAddrs, for the tests of package
// inspector_test.
const MaxLoginAddrs = lockout.MaxAddrs
