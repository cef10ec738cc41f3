// Package benchpg gives a benchmark run a PostgreSQL schema of its own, so
// runs never see each other's rows, and drops it afterwards.
package benchpg

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"

	"github.com/jackc/pgx/v5"
)

// SchemaURL is base with a new schema (search_path) for one run named
// name; the store creates the schema.
func SchemaURL(base, name string) string {
	b := make([]byte, 4)
	rand.Read(b)
	u, err := url.Parse(base)
	if err != nil {
		panic(err)
	}
	q := u.Query()
	q.Set("search_path", "evfwd_bench_"+name+"_"+hex.EncodeToString(b))
	u.RawQuery = q.Encode()
	return u.String()
}

// Drop drops the schema of schemaURL, connecting through base.
func Drop(base, schemaURL string) {
	u, _ := url.Parse(schemaURL)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		panic(err)
	}
	defer conn.Close(ctx)
	conn.Exec(ctx, "DROP SCHEMA "+pgx.Identifier{u.Query().Get("search_path")}.Sanitize()+" CASCADE")
}
