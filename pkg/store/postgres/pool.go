package postgres

import (
	"context"
	"encoding/binary"
	"net"
	"strings"
	"sync/atomic"
	"time"

	"github.com/evfwd/evfwd/pkg/store"
	"github.com/jackc/pgx/v5/pgxpool"
)

// The pool after the server went away (a restart, a failover, a link cut
// by a middlebox that dropped its state). Two things kept it from serving
// once the server answered again:
//
//   - A new connection had no deadline of its own: pgxpool opens it for a
//     caller but not under the caller's deadline (the caller gives up; the
//     connect goes on, so that the next caller may have it), and without
//     connect_timeout nothing else ends it. A connect that hears nothing
//     back (a dropped SYN, a middlebox that lost the flow) held its slot
//     of the pool until the kernel gave up, a minute or two: every failed
//     call while the server was down left one more, and once they held
//     every slot, the calls after the heal waited for one until their
//     deadline (TestSilentLinkRecovery: 13.1 s after the heal with 4
//     slots). A connect now ends after connectTimeout, unless the URL
//     sets connect_timeout.
//   - A connection that failed kept its slot while pgconn closed it: it
//     sends the server a cancel request, on a connection of its own, and
//     waits for the server to close that one, then sends Terminate and
//     reads what is left until the server closes, each for up to 15 s,
//     and pgxpool frees the slot only after. On a link that answers
//     nothing that is 15 to 30 s per connection; the calls after the heal
//     waited for those slots too. The connections the store dials now
//     give that cleanup closeGrace (boundedConn).
//
// TCP keepalives go after keepAliveIdle without traffic, and a peer that
// answers none is given up after about keepAliveIdle + keepAliveCount ×
// keepAliveInterval (11 s) instead of Go's 15 s + 9 × 15 s: an idle
// connection whose server vanished without a FIN or RST then fails when
// it is next used, rather than taking that call's whole deadline.
const (
	connectTimeout    = store.CallTimeout
	keepAliveIdle     = 5 * time.Second
	keepAliveInterval = 2 * time.Second
	keepAliveCount    = 3
	closeGrace        = time.Second
)

// configurePool applies the above to cfg, parsed from url.
func configurePool(cfg *pgxpool.Config, url string) {
	if !strings.Contains(url, "connect_timeout") {
		cfg.ConnConfig.ConnectTimeout = connectTimeout
	}
	d := &net.Dialer{Timeout: cfg.ConnConfig.ConnectTimeout, KeepAliveConfig: net.KeepAliveConfig{Enable: true,
		Idle: keepAliveIdle, Interval: keepAliveInterval, Count: keepAliveCount}}
	cfg.ConnConfig.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &boundedConn{Conn: c}, nil
	}
}

// boundedConn is a connection whose cleanup after a failure takes
// closeGrace at most (see above), not pgconn's 15 s:
//
//   - The one deadline pgconn sets in the future is its cleanup's (15 s
//     from now, pgconn.asyncClose; a cancelled call's deadline is now,
//     and the others are cleared): a deadline further away than
//     closeGrace is cut to closeGrace from now.
//   - A connection whose first message is a cancel request (the
//     protocol's code 80877102) waits closeGrace at most for the server
//     to close it. The server acts on a cancel request as it reads it and
//     answers nothing; this wait only tells pgconn it was read. (With TLS
//     the request is encrypted, and this connection cannot tell.)
type boundedConn struct {
	net.Conn
	wrote atomic.Bool
}

// cancelRequestCode identifies a CancelRequest message.
const cancelRequestCode = 80877102

func (c *boundedConn) Write(b []byte) (int, error) {
	if c.wrote.CompareAndSwap(false, true) {
		if len(b) >= 8 && binary.BigEndian.Uint32(b[0:4]) == uint32(len(b)) && binary.BigEndian.Uint32(b[4:8]) == cancelRequestCode {
			c.Conn.SetReadDeadline(time.Now().Add(closeGrace))
		}
	}
	return c.Conn.Write(b)
}

func (c *boundedConn) SetDeadline(t time.Time) error {
	if limit := time.Now().Add(closeGrace); !t.IsZero() && t.After(limit) {
		t = limit
	}
	return c.Conn.SetDeadline(t)
}
