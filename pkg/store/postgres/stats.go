package postgres

import (
	"context"
	"regexp"
	"sync"

	"github.com/evfwd/evfwd/pkg/store"
	"github.com/evfwd/evfwd/pkg/store/internal/rowscan"
	"github.com/jackc/pgx/v5"
)

// statsSQL counts each source's pending deliveries and finds its oldest
// from the partial index deliveries_due (source, destination,
// next_attempt_at, id) WHERE status = 'pending' (an index-only scan: it
// holds every column used, and leads with the source), then
// reads that one delivery's created_at by primary key. Ids grow with time,
// so the smallest pending id is the oldest pending delivery.
const statsSQL = `SELECT p.source, p.n, d.created_at
	FROM (SELECT source, count(*) AS n, min(id) AS first FROM deliveries
		WHERE status = 'pending' GROUP BY source) p
	JOIN deliveries d ON d.id = p.first
	ORDER BY p.source COLLATE "C"`

// sizeSQL is the size on disk of the tables named in $1 as the search path
// resolves them (evfwd's schema), with their indexes and TOAST; a name that
// resolves to nothing counts nothing.
const sizeSQL = `SELECT coalesce(sum(pg_total_relation_size(to_regclass(t))), 0)::bigint FROM unnest($1::text[]) AS t`

// tables are the tables evfwd's migrations create, read from their text so
// that a table a later migration adds is counted without a second list.
var tables = sync.OnceValue(func() []string {
	re := regexp.MustCompile(`(?i)CREATE\s+(?:UNLOGGED\s+)?TABLE\s+(?:IF\s+NOT\s+EXISTS\s+)?(\w+)`)
	out := []string{"schema_migrations"}
	for _, m := range migrations {
		for _, sub := range re.FindAllStringSubmatch(m, -1) {
			out = append(out, sub[1])
		}
	}
	return out
})

// Stats implements store.Store. Both queries go in one round trip.
func (s *Store) Stats(ctx context.Context) (store.Stats, error) {
	var st store.Stats
	leave, err := s.enter()
	if err != nil {
		return st, err
	}
	defer leave()
	b := &pgx.Batch{}
	b.Queue(statsSQL)
	b.Queue(sizeSQL, tables())
	br := s.pool.SendBatch(ctx, b)
	defer br.Close()
	rows, err := br.Query()
	if err != nil {
		return st, err
	}
	if st.Pending, err = collect(rows, rowscan.Pending); err != nil {
		return store.Stats{}, err
	}
	if err := br.QueryRow().Scan(&st.SizeBytes); err != nil {
		return store.Stats{}, err
	}
	return st, br.Close()
}
