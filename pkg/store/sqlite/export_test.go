package sqlite

// Commits is how many group transactions s has run.
func Commits(s *Store) int64 { return s.commits.Load() }
