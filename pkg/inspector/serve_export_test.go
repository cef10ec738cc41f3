package inspector

// LoginAddrs is how many client addresses s keeps failed logins of, for
// the tests of package inspector_test.
func LoginAddrs(s *Serve) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.addrs)
}

// MaxLoginAddrs is maxLoginAddrs, for the tests of package inspector_test.
const MaxLoginAddrs = maxLoginAddrs
