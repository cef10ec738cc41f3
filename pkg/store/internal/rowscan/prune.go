package rowscan

import "github.com/evfwd/evfwd/pkg/store"

// Rows is what both drivers' result sets offer: *sql.Rows and pgx.Rows.
type Rows interface {
	Scanner
	Next() bool
	Err() error
}

// PruneScan reads the rows of one prune step's scan: (id, candidate,
// old) of up to store.PruneStep messages after id after, in id order. It
// returns the candidates among the old ones, the last id examined, and
// whether the pass is over: it stops at the first message inside the
// window (ids follow arrival), or when fewer rows came than a step asks.
// The caller closes rows.
func PruneScan(rows Rows, after int64) (ids []int64, last int64, done bool, err error) {
	last, examined := after, 0
	for rows.Next() {
		var id int64
		var candidate, old bool
		if err := rows.Scan(&id, &candidate, &old); err != nil {
			return nil, after, false, err
		}
		if !old {
			return ids, last, true, rows.Err()
		}
		examined++
		last = id
		if candidate {
			ids = append(ids, id)
		}
	}
	return ids, last, examined < store.PruneStep, rows.Err()
}
