package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// The online rewrite of a table (see deletion.go): swapRewrite and its
// phases, and what a swap that died half-way leaves behind.

// swapNames are the objects a swap of one table makes beside it.
type swapNames struct {
	table, copy, log, note      string // sanitized identifiers
	qualifiedLog, qualifiedCopy string
	prefix                      string // of the copy's index names
}

func namesFor(schema, table string) swapNames {
	return swapNames{
		table: pgx.Identifier{table}.Sanitize(), copy: pgx.Identifier{table + "_scrub"}.Sanitize(),
		log: pgx.Identifier{table + "_scrub_log"}.Sanitize(), note: pgx.Identifier{table + "_scrub_note"}.Sanitize(),
		qualifiedLog: pgx.Identifier{schema, table + "_scrub_log"}.Sanitize(), qualifiedCopy: pgx.Identifier{schema, table + "_scrub"}.Sanitize(),
		prefix: table + "_scrub_",
	}
}

// dropSwapLeftovers removes what a swap of table that did not finish left:
// its triggers (with the function and the log they fill), its copy.
func dropSwapLeftovers(ctx context.Context, c *pgx.Conn, table string) error {
	n := namesFor("", table)
	return locked(ctx, func() error {
		_, err := c.Exec(ctx, `DROP TABLE IF EXISTS `+n.copy+`; DROP FUNCTION IF EXISTS `+n.note+`() CASCADE; DROP TABLE IF EXISTS `+n.log)
		return err
	})
}

// canSwap reports whether table $1 has nothing that dropping it and
// renaming a copy in its place would lose or refuse: evfwd's own schema,
// owned by this role. An operator's trigger, row security policy,
// publication, inheritance, tablespace, storage option, column grant or
// extended statistics sends the rewrite to VACUUM FULL instead (a view on
// the table makes the swap fail, which does too).
const canSwap = `SELECT c.relkind = 'r' AND NOT c.relrowsecurity AND c.reltablespace = 0 AND c.reloptions IS NULL
		AND pg_get_userbyid(c.relowner) = current_user
		AND NOT EXISTS (SELECT 1 FROM pg_trigger WHERE tgrelid = c.oid AND NOT tgisinternal)
		AND NOT EXISTS (SELECT 1 FROM pg_policy WHERE polrelid = c.oid)
		AND NOT EXISTS (SELECT 1 FROM pg_publication_rel WHERE prrelid = c.oid)
		AND NOT EXISTS (SELECT 1 FROM pg_inherits WHERE inhrelid = c.oid OR inhparent = c.oid)
		AND NOT EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = c.oid AND attacl IS NOT NULL)
		AND NOT EXISTS (SELECT 1 FROM pg_statistic_ext WHERE stxrelid = c.oid)
	FROM pg_class c WHERE c.oid = $1::regclass`

// swapIndex is an index of the table and the one built for it on the copy.
type swapIndex struct {
	name, def, constraint, kind string // kind: p, u or "" (no constraint)
	tmp                         string
}

// swapKey is a foreign key of another table that references the table.
type swapKey struct{ table, name, def string }

// swap is a swap of one table under way: the objects it makes, and what it
// learns of the table as it goes.
type swap struct {
	c       *pgx.Conn
	table   string // as named, unquoted
	n       swapNames
	indexes []swapIndex
	fkeys   []swapKey
}

// swapRewrite rewrites table online, as pg_repack does:
//
//  1. statement triggers on the table note the id of every row written
//     from now on in a log table (noteWrites);
//  2. a copy table gets the live rows (writers go on), then the indexes of
//     the table (copyRows, copyIndexes);
//  3. the noted rows are copied again, a batch at a time, until few are
//     left (catchUpOnline);
//  4. one short transaction locks the table (and the tables whose foreign
//     keys reference it), copies the last noted rows, drops the table and
//     renames the copy in its place with the same indexes, constraints,
//     identity sequence position, foreign keys (NOT VALID, validated
//     afterwards) and grants (swapIn, then settle).
//
// Writers wait only for step 4: tens of milliseconds. The copy holds the
// live rows only, so no transaction's view of the old ones matters: one
// that has read the table keeps its lock, and step 4 waits for it.
func swapRewrite(ctx context.Context, c *pgx.Conn, table string) error {
	var ok bool
	var schema string
	if err := c.QueryRow(ctx, `SELECT (`+canSwap+`), current_schema()`, table).Scan(&ok, &schema); err != nil {
		return err
	}
	if !ok {
		return errNoSwap
	}
	sw := &swap{c: c, table: table, n: namesFor(schema, table)}
	for _, phase := range []func(context.Context) error{sw.noteWrites, sw.copyRows, sw.copyIndexes, sw.catchUpOnline, sw.swapIn} {
		if err := phase(ctx); err != nil {
			return err
		}
	}
	sw.settle(ctx)
	return nil
}

// noteWrites is step 1: the log, and the triggers that fill it.
func (sw *swap) noteWrites(ctx context.Context) error {
	n := sw.n
	return locked(ctx, func() error {
		return pgx.BeginFunc(ctx, sw.c, func(tx pgx.Tx) error {
			q := `CREATE TABLE ` + n.log + ` (seq bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, id bigint NOT NULL);
				CREATE FUNCTION ` + n.note + `() RETURNS trigger LANGUAGE plpgsql AS $$
					BEGIN INSERT INTO ` + n.qualifiedLog + ` (id) SELECT id FROM changed; RETURN NULL; END $$;`
			for _, ev := range []struct{ op, rows string }{{"INSERT", "NEW"}, {"UPDATE", "NEW"}, {"DELETE", "OLD"}} {
				q += fmt.Sprintf(`CREATE TRIGGER %s AFTER %s ON %s REFERENCING %s TABLE AS changed FOR EACH STATEMENT EXECUTE FUNCTION %s();`,
					pgx.Identifier{n.prefix + strings.ToLower(ev.op)}.Sanitize(), ev.op, n.table, ev.rows, n.note)
			}
			_, err := tx.Exec(ctx, q)
			return err
		})
	})
}

// copyRows is step 2's copy of the live rows. Every transaction that wrote
// the table before the triggers existed has ended (CREATE TRIGGER waited
// for them), so this copy and the noted ids together hold every row.
func (sw *swap) copyRows(ctx context.Context) error {
	_, err := sw.c.Exec(ctx, `CREATE TABLE `+sw.n.copy+` (LIKE `+sw.n.table+` INCLUDING DEFAULTS INCLUDING IDENTITY INCLUDING STORAGE);
		INSERT INTO `+sw.n.copy+` OVERRIDING SYSTEM VALUE SELECT * FROM `+sw.n.table)
	return err
}

// copyIndexes is step 2's indexes: each index of the table built on the
// copy under a name of its own, which the swap renames.
func (sw *swap) copyIndexes(ctx context.Context) error {
	rows, err := sw.c.Query(ctx, `SELECT quote_ident(x.relname), pg_get_indexdef(i.indexrelid), coalesce(quote_ident(k.conname), ''), coalesce(k.contype::text, '')
		FROM pg_index i JOIN pg_class x ON x.oid = i.indexrelid
			LEFT JOIN pg_constraint k ON k.conindid = i.indexrelid AND k.conrelid = i.indrelid
		WHERE i.indrelid = $1::regclass ORDER BY i.indexrelid`, sw.table)
	if err != nil {
		return err
	}
	sw.indexes, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (ix swapIndex, err error) {
		return ix, r.Scan(&ix.name, &ix.def, &ix.constraint, &ix.kind)
	})
	if err != nil {
		return err
	}
	for i := range sw.indexes {
		ix := &sw.indexes[i]
		using := strings.Index(ix.def, " USING ")
		if using < 0 || ix.kind != "" && ix.kind != "p" && ix.kind != "u" {
			return errNoSwap
		}
		ix.tmp = pgx.Identifier{fmt.Sprint(sw.n.prefix, i)}.Sanitize()
		unique := ""
		if strings.HasPrefix(ix.def, "CREATE UNIQUE ") {
			unique = "UNIQUE "
		}
		if _, err := sw.c.Exec(ctx, fmt.Sprintf(`CREATE %sINDEX %s ON %s%s`, unique, ix.tmp, sw.n.qualifiedCopy, ix.def[using:])); err != nil {
			return err
		}
	}
	return nil
}

// catchUpOnline is step 3: batches of noted rows copied again while
// writers go on, until a batch finds few (or after 20 batches).
func (sw *swap) catchUpOnline(ctx context.Context) error {
	for try := 0; try < 20; try++ {
		done, err := catchUp(ctx, sw.c, sw.n, 10_000)
		if err != nil {
			return err
		}
		if done < 1000 {
			break
		}
	}
	return nil
}

// swapIn is step 4: the foreign keys that reference the table are read,
// then one transaction, asked for again and again (locked), puts the copy
// in the table's place.
func (sw *swap) swapIn(ctx context.Context) error {
	rows, err := sw.c.Query(ctx, `SELECT conrelid::regclass::text, quote_ident(conname), pg_get_constraintdef(oid)
		FROM pg_constraint WHERE confrelid = $1::regclass AND contype = 'f' ORDER BY conrelid, conname`, sw.table)
	if err != nil {
		return err
	}
	sw.fkeys, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (k swapKey, err error) {
		err = r.Scan(&k.table, &k.name, &k.def)
		k.def = strings.TrimSuffix(k.def, " NOT VALID") // one a crash left unvalidated
		return k, err
	})
	if err != nil {
		return err
	}
	// The referencing tables are locked first: leasing locks deliveries
	// before it reads messages.
	lock := "LOCK TABLE "
	for i, k := range sw.fkeys {
		if i == 0 || k.table != sw.fkeys[i-1].table {
			lock += k.table + ", "
		}
	}
	lock += sw.n.table + " IN ACCESS EXCLUSIVE MODE"
	return locked(ctx, func() error {
		return pgx.BeginFunc(ctx, sw.c, func(tx pgx.Tx) error { return sw.swapTx(ctx, tx, lock) })
	})
}

// swapTx is step 4's transaction: under lock, the last noted rows, then
// the DDL of the swap.
func (sw *swap) swapTx(ctx context.Context, tx pgx.Tx, lock string) error {
	if _, err := tx.Exec(ctx, lock); err != nil {
		return err
	}
	for {
		done, err := catchUp(ctx, tx, sw.n, 100_000)
		if err != nil {
			return err
		}
		if done == 0 {
			break
		}
	}
	ddl, err := sw.ddl(ctx, tx)
	if err != nil {
		return err
	}
	for _, q := range ddl {
		if _, err := tx.Exec(ctx, q); err != nil {
			var pe *pgconn.PgError
			if errors.As(err, &pe) && pe.Code == "2BP01" { // dependent_objects_still_exist: a view, say
				return fmt.Errorf("%w: %v", errNoSwap, err)
			}
			return fmt.Errorf("swap: %s: %w", q, err)
		}
	}
	return nil
}

// ddl is the swap's DDL, in order: the foreign keys dropped, the table
// dropped and the copy renamed, the identity sequence, the indexes and
// constraints, the foreign keys again, the grants, the log and triggers
// dropped.
func (sw *swap) ddl(ctx context.Context, tx pgx.Tx) ([]string, error) {
	n := sw.n
	var ddl []string
	for _, k := range sw.fkeys {
		ddl = append(ddl, `ALTER TABLE `+k.table+` DROP CONSTRAINT `+k.name)
	}
	ddl = append(ddl, `DROP TABLE `+n.table, `ALTER TABLE `+n.copy+` RENAME TO `+n.table)
	seq, err := sw.sequence(ctx, tx)
	if err != nil {
		return nil, err
	}
	ddl = append(ddl, seq...)
	for _, ix := range sw.indexes {
		switch ix.kind {
		case "p":
			ddl = append(ddl, `ALTER TABLE `+n.table+` ADD CONSTRAINT `+ix.constraint+` PRIMARY KEY USING INDEX `+ix.tmp)
		case "u":
			ddl = append(ddl, `ALTER TABLE `+n.table+` ADD CONSTRAINT `+ix.constraint+` UNIQUE USING INDEX `+ix.tmp)
		default:
			ddl = append(ddl, `ALTER INDEX `+ix.tmp+` RENAME TO `+ix.name)
		}
	}
	for _, k := range sw.fkeys {
		ddl = append(ddl, `ALTER TABLE `+k.table+` ADD CONSTRAINT `+k.name+` `+k.def+` NOT VALID`)
	}
	grants, err := sw.grants(ctx, tx)
	if err != nil {
		return nil, err
	}
	ddl = append(ddl, grants...)
	return append(ddl, `DROP FUNCTION `+n.note+`() CASCADE`, `DROP TABLE `+n.log), nil
}

// sequence is the DDL by which the copy's identity sequence takes the name
// and the position of the original's (none when either has none).
func (sw *swap) sequence(ctx context.Context, tx pgx.Tx) ([]string, error) {
	var oldSeq, seqName, seq *string
	if err := tx.QueryRow(ctx, `SELECT pg_get_serial_sequence($1, 'id'), (SELECT quote_ident(relname) FROM pg_class
		WHERE oid = pg_get_serial_sequence($1, 'id')::regclass), pg_get_serial_sequence($2, 'id')`, sw.table, sw.table+"_scrub").Scan(&oldSeq, &seqName, &seq); err != nil {
		return nil, err
	}
	if oldSeq == nil || seq == nil {
		return nil, nil
	}
	var last int64
	var called bool
	if err := tx.QueryRow(ctx, `SELECT last_value, is_called FROM `+*oldSeq).Scan(&last, &called); err != nil {
		return nil, err
	}
	return []string{`ALTER SEQUENCE ` + *seq + ` RENAME TO ` + *seqName,
		fmt.Sprintf(`SELECT setval(pg_get_serial_sequence('%s', 'id'), %d, %t)`, sw.table, last, called)}, nil
}

// grants are the table's grants to roles other than its owner, as GRANT
// statements on the copy.
func (sw *swap) grants(ctx context.Context, tx pgx.Tx) ([]string, error) {
	rows, err := tx.Query(ctx, `SELECT a.privilege_type, CASE WHEN a.grantee = 0 THEN 'PUBLIC' ELSE quote_ident(pg_get_userbyid(a.grantee)) END, a.is_grantable
		FROM pg_class c, aclexplode(c.relacl) a WHERE c.oid = $1::regclass AND a.grantee <> c.relowner`, sw.table)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (string, error) {
		var priv, grantee string
		var option bool
		err := r.Scan(&priv, &grantee, &option)
		g := "GRANT " + priv + " ON " + sw.n.table + " TO " + grantee
		if option {
			g += " WITH GRANT OPTION"
		}
		return g, err
	})
}

// settle follows the swap. The foreign keys were added without a scan
// under the lock; checking them now takes no lock writers wait for, nor
// does ANALYZE, which the new table needs for its plans. The old rows are
// gone either way: a failure here is left to the next rewrite (or
// autovacuum).
func (sw *swap) settle(ctx context.Context) {
	for _, k := range sw.fkeys {
		locked(ctx, func() error {
			_, err := sw.c.Exec(ctx, `ALTER TABLE `+k.table+` VALIDATE CONSTRAINT `+k.name)
			return err
		})
	}
	locked(ctx, func() error {
		_, err := sw.c.Exec(ctx, `ANALYZE `+sw.n.table)
		return err
	})
}

// catchUp copies again up to limit rows noted since the copy (their
// latest state, or nothing for one deleted) and reports how many notes it
// took.
func catchUp(ctx context.Context, q interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}, n swapNames, limit int) (int, error) {
	rows, err := q.Query(ctx, `DELETE FROM `+n.log+` WHERE seq IN (SELECT seq FROM `+n.log+` ORDER BY seq LIMIT $1) RETURNING id`, limit)
	if err != nil {
		return 0, err
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil || len(ids) == 0 {
		return 0, err
	}
	if _, err := q.Exec(ctx, `DELETE FROM `+n.copy+` WHERE id = ANY($1)`, ids); err != nil {
		return 0, err
	}
	_, err = q.Exec(ctx, `INSERT INTO `+n.copy+` OVERRIDING SYSTEM VALUE SELECT * FROM `+n.table+` WHERE id = ANY($1)`, ids)
	return len(ids), err
}
