//go:build race

package serve_test

// raceEnabled: the race detector slows SQLite (pure Go) about tenfold, so
// the large-sync test runs at a tenth of its size under it.
const raceEnabled = true
