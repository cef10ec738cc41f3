package sqlite_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/evfwd/evfwd/pkg/store"
	"github.com/evfwd/evfwd/pkg/store/sqlite"
	"github.com/evfwd/evfwd/pkg/store/storetest"
)

func TestSyncConformance(t *testing.T) {
	storetest.RunSync(t, func(t *testing.T) func() store.Store {
		path := filepath.Join(t.TempDir(), "evfwd.db")
		return func() store.Store {
			s, err := sqlite.Open(context.Background(), path, sqlite.Options{})
			if err != nil {
				t.Fatal(err)
			}
			return s
		}
	})
}
