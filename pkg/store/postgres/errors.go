package postgres

import (
	"errors"
	"fmt"

	"github.com/evfwd/evfwd/pkg/store"
	"github.com/jackc/pgx/v5/pgconn"
)

// capacity lists the SQLSTATEs of class 53, "insufficient resources", that
// mean the server cannot take the write now but may once an operator (or
// time) frees what it lacks. 53400 configuration_limit_exceeded is left
// out: the same statement would exceed the same limit again.
var capacity = map[string]bool{
	"53000": true, // insufficient_resources
	"53100": true, // disk_full
	"53200": true, // out_of_memory
	"53300": true, // too_many_connections
}

// classify wraps store.ErrFull around err when PostgreSQL refused the
// write for lack of capacity (see capacity); a refused connection (too
// many clients) carries the same SQLSTATE inside pgconn's ConnectError.
// Every other error, and nil, is returned as it is.
func classify(err error) error {
	var pe *pgconn.PgError
	if errors.As(err, &pe) && capacity[pe.Code] {
		return fmt.Errorf("%w: %w", store.ErrFull, err)
	}
	return err
}
