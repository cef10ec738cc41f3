package sqlite

import (
	"context"
	"database/sql"
)

// Commits is how many group transactions s has run.
func Commits(s *Store) int64 { return s.commits.Load() }

// MigrateStepwise runs every migration on the database at path one by one,
// as on a file that an evfwd of each version in turn migrated.
func MigrateStepwise(path string) error {
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		return err
	}
	defer db.Close()
	if _, err := db.Exec(createSchemaMigrations); err != nil {
		return err
	}
	return applyEach(context.Background(), db)
}
