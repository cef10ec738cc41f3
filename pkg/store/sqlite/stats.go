package sqlite

import (
	"context"
	"errors"
	"io/fs"
	"os"

	"github.com/evfwd/evfwd/pkg/store"
	"github.com/evfwd/evfwd/pkg/store/internal/rowscan"
)

// statsSQL counts each source's pending deliveries and finds its oldest,
// reading only index entries of pending rows (deliveries_due is partial on
// status = 'pending', leads with the source, and like every SQLite index
// carries the rowid, so count and min(id) need no table row and the
// groups come in the index's order, unsorted), then reads that one
// delivery's created_at by primary key. Ids grow with time, so the
// smallest pending id is the oldest pending delivery.
const statsSQL = `SELECT p.source, p.n, d.created_at
	FROM (SELECT source, count(*) AS n, min(id) AS first FROM deliveries INDEXED BY deliveries_due
		WHERE status = 'pending' GROUP BY source) p
	JOIN deliveries d ON d.id = p.first
	ORDER BY p.source`

// Stats implements store.Store.
func (s *Store) Stats(ctx context.Context) (store.Stats, error) {
	var st store.Stats
	rows, err := s.read.QueryContext(ctx, statsSQL)
	if err != nil {
		return st, err
	}
	if st.Pending, err = collect(rows, rowscan.Pending); err != nil {
		return store.Stats{}, err
	}
	for _, name := range []string{s.path, s.path + "-wal"} {
		fi, err := os.Stat(name)
		if errors.Is(err, fs.ErrNotExist) {
			continue // no WAL between connections
		}
		if err != nil {
			return st, err
		}
		st.SizeBytes += fi.Size()
	}
	return st, nil
}
