package postgres

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"

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

// gone lists the SQLSTATEs, besides class 08 (connection_exception), that
// mean the server is going away or not there yet: a stop, a restart, a
// failover. The call may succeed against the server that comes back.
var gone = map[string]bool{
	"57P01": true, // admin_shutdown: pg_ctl stop -m fast, a failover's old primary
	"57P02": true, // crash_shutdown: another backend crashed, the server restarts
	"57P03": true, // cannot_connect_now: the server is starting or in recovery
}

// classify wraps store.ErrFull around err when PostgreSQL refused the
// write for lack of capacity (see capacity); a refused connection (too
// many clients) carries the same SQLSTATE inside pgconn's ConnectError.
// It wraps store.ErrUnavailable around err when the server could not be
// reached (see unreachable). Every other error, and nil, is returned as it
// is.
func classify(err error) error {
	var pe *pgconn.PgError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &pe) && capacity[pe.Code]:
		return fmt.Errorf("%w: %w", store.ErrFull, err)
	case unreachable(err):
		return fmt.Errorf("%w: %w", store.ErrUnavailable, err)
	}
	return err
}

// unreachable reports errors that say the database was not reached, or
// stopped answering: a server going away (gone, class 08), a failed
// connection attempt that the server did not refuse with an error of its
// own (refused, reset, no route, timed out), a connection that broke
// during a call, and a deadline that passed (a cut link answers nothing;
// the call's deadline is what ends it).
func unreachable(err error) bool {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		// The server answered: only its "going away" codes count. A
		// refused login (28P01) or a missing database is the operator's,
		// not the link's.
		return gone[pe.Code] || strings.HasPrefix(pe.Code, "08")
	}
	var ce *pgconn.ConnectError
	var ne net.Error
	switch {
	case errors.As(err, &ce),
		errors.Is(err, context.DeadlineExceeded), pgconn.Timeout(err),
		errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET),
		errors.Is(err, syscall.EPIPE), errors.Is(err, syscall.ECONNABORTED),
		errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, net.ErrClosed),
		errors.As(err, &ne):
		return true
	}
	return false
}
