// Package syncrun is the run of an audience or trait sync, written once
// for both stores over a Driver: one engine's statements, nothing else.
//
// A sync runs in bounded steps, each its own small transaction, so no
// transaction holds locks (or, on SQLite, the writer) or grows for longer
// than a chunk:
//
//  1. stage: the list goes into sync_lists under the run's id, a chunk per
//     step; no reader looks there, since syncs.list names the current
//     list of each audience or trait.
//  2. diff: pages of the new list and the current one are read outside any
//     step (both are fixed while the run holds its key); the messages of
//     each page's changes go into sync_outbox under the run's id, where
//     neither readers nor the forwarder look.
//  3. flip: one small step points syncs.list at the new list and marks the
//     run committed. Before it the sync has changed nothing visible; after
//     it the sync is done, whatever happens to the process.
//  4. finish: the run's outbox rows move into messages and deliveries a
//     chunk per step (in the order the diff wrote them), then the replaced
//     list's rows are dropped a chunk at a time, then the run's row.
//
// sync_runs records every run not finished. Recover deals with the runs a
// crash (or a failed step after the flip) left: a run not committed is
// garbage, its outbox and list dropped; a committed one is finished
// exactly as its sync would have (a moved chunk leaves the outbox in the
// same step, so no message is queued twice).
//
// What stays in each engine: how the syncs of one key take turns (the
// caller holds the key around Sync and Recover) and when leftovers are
// looked for.
package syncrun

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"iter"
	"time"

	"github.com/evfwd/evfwd/pkg/store"
	"github.com/evfwd/evfwd/pkg/store/internal/rowscan"
	"github.com/evfwd/evfwd/pkg/store/internal/synchook"
)

// LeftoversSQL counts the rows of syncs still in progress or left behind:
// runs, their outbox messages, and stored values of no current list (the
// stores' SyncLeftovers, for tests).
const LeftoversSQL = `SELECT (SELECT count(*) FROM sync_runs) + (SELECT count(*) FROM sync_outbox)
	+ (SELECT count(*) FROM sync_lists WHERE list NOT IN (SELECT list FROM syncs))`

// Run is one sync as sync_runs records it.
type Run struct {
	ID        string // also the id of its list
	Replaces  string // the list it replaces; "" on a first sync
	Committed bool
	At        int64 // the sync's time (created_at of its deliveries)
}

// ScanRun reads a Run from the columns id, replaces, committed, at.
func ScanRun(r rowscan.Scanner) (Run, error) {
	var run Run
	return run, r.Scan(&run.ID, &run.Replaces, &run.Committed, &run.At)
}

// Row is one user of a diff page.
type Row struct {
	User   string
	Value  []byte
	Prev   []byte // the value in the replaced list; nil when not there
	Listed bool   // in the new list
}

// ScanRow reads a Row from the columns of a diff page, in its fields'
// order.
func ScanRow(r rowscan.Scanner) (Row, error) {
	var row Row
	return row, r.Scan(&row.User, &row.Value, &row.Prev, &row.Listed)
}

// Driver is one engine's statements for the runs of one key. The reads
// run outside any step; the others run within one (tx).
type Driver[Tx any] interface {
	// Step runs fn as one transaction.
	Step(ctx context.Context, fn func(ctx context.Context, tx Tx) error) error

	// Current reports the list syncs names for the key; ok is false on
	// its first sync.
	Current(ctx context.Context) (list string, ok bool, err error)
	// Runs lists the key's runs, oldest first.
	Runs(ctx context.Context) ([]Run, error)
	// Listed reads up to limit users of r's list after after, in user id
	// order, with their values in r.Replaces as Prev.
	Listed(ctx context.Context, r Run, after string, limit int) ([]Row, error)
	// Replaced reads up to limit users of r.Replaces after after, in user
	// id order, Listed telling whether r's list has them.
	Replaced(ctx context.Context, r Run, after string, limit int) ([]Row, error)

	// InsertRun records r (not committed) for the key.
	InsertRun(ctx context.Context, tx Tx, r Run) error
	// Stage adds values (one per user) to list, a user already there
	// taking the new value.
	Stage(ctx context.Context, tx Tx, list string, values []store.Value) error
	// WriteOutbox adds msgs to the outbox of run, in order.
	WriteOutbox(ctx context.Context, tx Tx, run string, msgs []store.Message) error
	// Flip points syncs at r's list, named sy.Name: a new row when first,
	// else the row that names r.Replaces. It reports whether it did.
	Flip(ctx context.Context, tx Tx, r Run, sy store.Sync, first bool) (bool, error)
	// Commit marks run committed.
	Commit(ctx context.Context, tx Tx, run string) error
	// MoveOutbox moves the first limit messages of r's outbox into the
	// queue as Ingest would (deliveries created at r.At), deleting them
	// from the outbox, and reports how many it moved.
	MoveOutbox(ctx context.Context, tx Tx, r Run, limit int) (int, error)
	// DropList deletes up to limit rows of list and reports how many.
	DropList(ctx context.Context, tx Tx, list string, limit int) (int, error)
	// DropOutbox deletes up to limit outbox rows of run and reports how
	// many.
	DropOutbox(ctx context.Context, tx Tx, run string, limit int) (int, error)
	// ForgetRun deletes run's row.
	ForgetRun(ctx context.Context, tx Tx, run string) error
}

// Config is how an engine runs its syncs.
type Config struct {
	Sizes Sizes
	// Hook is called between steps with the synchook names (SetSyncHook's,
	// for tests): an error it returns stops the sync at once, leaving what
	// a crash at that point would.
	Hook func(step string) error
	// Later says when a committed run's messages go out if finishing it
	// fails ("after a restart").
	Later string
}

// Sync runs a sync of sy's key, after recovering the key's earlier runs;
// the caller holds the key. It answers after the last step: the result's
// messages are then in the queue.
func Sync[Tx any](ctx context.Context, d Driver[Tx], cfg Config, sy store.Sync, values iter.Seq2[store.Value, error]) (*store.SyncResult, error) {
	if err := Recover(ctx, d, cfg.Sizes); err != nil {
		return nil, err
	}
	var res store.SyncResult
	x := &run[Tx]{d: d, pace: cfg.Sizes.pacers(), r: Run{ID: newRunID(), At: store.Millis(sy.Now)}}
	list, ok, err := d.Current(ctx)
	if err != nil {
		return nil, err
	}
	x.r.Replaces, res.First = list, !ok
	if err := d.Step(ctx, func(ctx context.Context, tx Tx) error { return d.InsertRun(ctx, tx, x.r) }); err != nil {
		return nil, err
	}
	// Until the flip, a failure leaves nothing behind (even when ctx has
	// ended); a stop by the test hook leaves what a crash would.
	stopped := false
	hook := func(step string) error {
		err := call(cfg.Hook, step)
		stopped = err != nil
		return err
	}
	fail := func(err error) (*store.SyncResult, error) {
		if !stopped {
			x.discard(context.WithoutCancel(ctx))
		}
		return nil, err
	}
	if err := x.stage(ctx, values); err != nil {
		return fail(err)
	}
	if err := hook(synchook.Staged); err != nil {
		return fail(err)
	}
	if err := x.diff(ctx, sy, &res); err != nil {
		return fail(err)
	}
	if err := hook(synchook.Diffed); err != nil {
		return fail(err)
	}
	if err := x.flip(context.WithoutCancel(ctx), sy, res.First); err != nil {
		return fail(err)
	}
	// Committed: the rest must happen, even when ctx has ended; if the
	// process stops first, a recovery finishes it.
	if err := hook(synchook.Flipped); err != nil {
		return nil, err
	}
	x.r.Committed, x.hook = true, cfg.Hook
	if err := x.finish(context.WithoutCancel(ctx)); err != nil {
		return nil, fmt.Errorf("sync committed; its messages are queued and go out %s: %w", cfg.Later, err)
	}
	return &res, nil
}

// Recover finishes the committed runs d lists and drops the others, oldest
// first; the caller holds their keys, so no sync is running them.
func Recover[Tx any](ctx context.Context, d Driver[Tx], sizes Sizes) error {
	runs, err := d.Runs(ctx)
	if err != nil {
		return err
	}
	for _, r := range runs {
		x := &run[Tx]{d: d, r: r, pace: sizes.pacers()}
		if r.Committed {
			err = x.finish(ctx)
		} else {
			err = x.discard(ctx)
		}
		if err != nil {
			return fmt.Errorf("sync run %s: %w", r.ID, err)
		}
	}
	return nil
}

func newRunID() string {
	b := make([]byte, 8)
	rand.Read(b)
	return hex.EncodeToString(b)
}

func call(hook func(string) error, step string) error {
	if hook == nil {
		return nil
	}
	return hook(step)
}

// run is one sync, or one recovered run, on its way.
type run[Tx any] struct {
	d    Driver[Tx]
	r    Run
	pace pacers
	hook func(string) error // called after each step of finish; nil in a recovery
}

// paced runs fn as a step and tells p how long fn took for the rows it
// reports (the time within the step, not the wait for it).
func (x *run[Tx]) paced(ctx context.Context, p *pacer, fn func(ctx context.Context, tx Tx) (int, error)) (int, error) {
	var n int
	err := x.d.Step(ctx, func(ctx context.Context, tx Tx) error {
		start := time.Now()
		var err error
		n, err = fn(ctx, tx)
		p.took(n, time.Since(start))
		return err
	})
	return n, err
}

// stage writes values into the run's list, a chunk per step.
func (x *run[Tx]) stage(ctx context.Context, values iter.Seq2[store.Value, error]) error {
	var chunk []store.Value
	flush := func() error {
		if len(chunk) == 0 {
			return nil
		}
		vals := lastValues(chunk)
		_, err := x.paced(ctx, x.pace.stage, func(ctx context.Context, tx Tx) (int, error) {
			return len(chunk), x.d.Stage(ctx, tx, x.r.ID, vals)
		})
		chunk = chunk[:0]
		return err
	}
	for v, err := range values {
		if err != nil {
			return err
		}
		// Copy: the caller may reuse its buffers.
		chunk = append(chunk, store.Value{UserID: v.UserID, Value: append([]byte(nil), v.Value...)})
		if len(chunk) >= x.pace.stage.size() {
			if err := flush(); err != nil {
				return err
			}
		}
	}
	return flush()
}

// lastValues is chunk with only the last value of a user listed twice:
// later chunks overwrite, so the last value wins throughout (and one
// statement need not update a row twice, which PostgreSQL refuses).
func lastValues(chunk []store.Value) []store.Value {
	last := make(map[string]int, len(chunk))
	for i, v := range chunk {
		last[v.UserID] = i
	}
	if len(last) == len(chunk) {
		return chunk
	}
	out := make([]store.Value, 0, len(last))
	for i, v := range chunk {
		if last[v.UserID] == i {
			out = append(out, v)
		}
	}
	return out
}

// flip is the commit of a sync: syncs names the new list, the run is
// committed. The run held its key throughout, so the current list is the
// one it diffed against; it checks all the same.
func (x *run[Tx]) flip(ctx context.Context, sy store.Sync, first bool) error {
	return x.d.Step(ctx, func(ctx context.Context, tx Tx) error {
		ok, err := x.d.Flip(ctx, tx, x.r, sy, first)
		if err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("sync %s %s: its list changed during the sync", sy.Kind, sy.Key)
		}
		return x.d.Commit(ctx, tx, x.r.ID)
	})
}

// finish moves the committed run's outbox into the queue, drops the list it
// replaced and forgets the run, a bounded step at a time.
func (x *run[Tx]) finish(ctx context.Context) error {
	if err := x.chunks(ctx, x.pace.move, synchook.Moved, func(ctx context.Context, tx Tx, n int) (int, error) {
		return x.d.MoveOutbox(ctx, tx, x.r, n)
	}); err != nil {
		return err
	}
	if x.r.Replaces != "" {
		if err := x.dropList(ctx, x.r.Replaces); err != nil {
			return err
		}
	}
	return x.forget(ctx)
}

// discard drops what a run not committed wrote: its outbox, its list and
// its row.
func (x *run[Tx]) discard(ctx context.Context) error {
	if err := x.chunks(ctx, x.pace.outbox, "", func(ctx context.Context, tx Tx, n int) (int, error) {
		return x.d.DropOutbox(ctx, tx, x.r.ID, n)
	}); err != nil {
		return err
	}
	if err := x.dropList(ctx, x.r.ID); err != nil {
		return err
	}
	return x.forget(ctx)
}

func (x *run[Tx]) dropList(ctx context.Context, list string) error {
	return x.chunks(ctx, x.pace.drop, synchook.Dropped, func(ctx context.Context, tx Tx, n int) (int, error) {
		return x.d.DropList(ctx, tx, list, n)
	})
}

func (x *run[Tx]) forget(ctx context.Context) error {
	return x.d.Step(ctx, func(ctx context.Context, tx Tx) error { return x.d.ForgetRun(ctx, tx, x.r.ID) })
}

// chunks runs fn a step at a time, each on up to p's size of rows, until
// a step finds none; after each step that did, it calls the run's hook
// with step (unless "").
func (x *run[Tx]) chunks(ctx context.Context, p *pacer, step string, fn func(ctx context.Context, tx Tx, limit int) (int, error)) error {
	for {
		n, err := x.paced(ctx, p, func(ctx context.Context, tx Tx) (int, error) { return fn(ctx, tx, p.size()) })
		if err != nil || n == 0 {
			return err
		}
		if step != "" {
			if err := call(x.hook, step); err != nil {
				return err
			}
		}
	}
}
