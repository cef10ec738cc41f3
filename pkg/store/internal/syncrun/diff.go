package syncrun

import (
	"bytes"
	"context"

	"github.com/evfwd/evfwd/pkg/store"
)

// diff compares the staged list with the one it replaces, page by page,
// counts into res and writes the messages of the changes to the outbox:
// first the listed users whose value is new or different, then the users
// no longer listed, each in user id order.
func (x *run[Tx]) diff(ctx context.Context, sy store.Sync, res *store.SyncResult) error {
	o := outbox[Tx]{x: x, res: res}
	if err := pages(ctx, x.r, x.d.Listed, func(v Row) {
		switch {
		case v.Prev == nil:
			res.Added++
		case bytes.Equal(v.Prev, v.Value):
			res.Unchanged++
			return
		default:
			res.Changed++
		}
		o.msgs = append(o.msgs, sy.Messages(v.User, v.Value)...)
	}, o.flush); err != nil {
		return err
	}
	if x.r.Replaces != "" {
		if err := pages(ctx, x.r, x.d.Replaced, func(v Row) {
			if !v.Listed {
				res.Removed++
				o.msgs = append(o.msgs, sy.Messages(v.User, sy.Removed)...)
			}
		}, o.flush); err != nil {
			return err
		}
	}
	return o.flushAll(ctx)
}

// pages reads every page of read, calling each for every row and then
// flush after each page.
func pages(ctx context.Context, r Run, read func(ctx context.Context, r Run, after string, limit int) ([]Row, error),
	each func(Row), flush func(context.Context) error) error {
	for after := ""; ; {
		rows, err := read(ctx, r, after, syncPage)
		if err != nil || len(rows) == 0 {
			return err
		}
		after = rows[len(rows)-1].User
		for _, v := range rows {
			each(v)
		}
		if err := flush(ctx); err != nil {
			return err
		}
	}
}

// outbox holds the messages of a diff not yet written, and writes them a
// paced step at a time, counting them into res.
type outbox[Tx any] struct {
	x    *run[Tx]
	res  *store.SyncResult
	msgs []store.Message
}

// flush writes the full steps' worth of messages held.
func (o *outbox[Tx]) flush(ctx context.Context) error { return o.write(ctx, false) }

// flushAll writes every message held.
func (o *outbox[Tx]) flushAll(ctx context.Context) error { return o.write(ctx, true) }

func (o *outbox[Tx]) write(ctx context.Context, all bool) error {
	p := o.x.pace.outbox
	for len(o.msgs) >= p.size() || all && len(o.msgs) > 0 {
		n := min(len(o.msgs), p.size())
		if _, err := o.x.paced(ctx, p, func(ctx context.Context, tx Tx) (int, error) {
			return n, o.x.d.WriteOutbox(ctx, tx, o.x.r.ID, o.msgs[:n])
		}); err != nil {
			return err
		}
		o.res.Messages += n
		o.msgs = o.msgs[n:]
	}
	return nil
}
