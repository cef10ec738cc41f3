package store

import "time"

// Stats is what monitoring reads from a store at scrape time: the queue
// and the store's size. Taking it costs in proportion to the deliveries
// pending, never to the history kept (delivered, failed, dead rows).
type Stats struct {
	// Pending has one entry per source with pending deliveries (due,
	// scheduled for a retry, or leased and in flight), by source; a
	// source with none is absent.
	Pending []SourcePending
	// SizeBytes is the store's size on disk: for SQLite the database file
	// and its WAL; for PostgreSQL the tables evfwd created, with their
	// indexes and TOAST.
	SizeBytes int64
}

// SourcePending is the pending work of one source.
type SourcePending struct {
	Source string
	N      int64 // pending deliveries
	// Oldest is when the oldest pending delivery was created (when its
	// message was stored), kept through retries: its age is how long the
	// queue has held work.
	Oldest time.Time
}
