package postgres_test

import (
	"testing"

	"github.com/evfwd/evfwd/pkg/store"
	"github.com/evfwd/evfwd/pkg/store/postgres"
	"github.com/evfwd/evfwd/pkg/store/postgres/pgtest"
	"github.com/evfwd/evfwd/pkg/store/storetest"
)

func TestSyncConformance(t *testing.T) {
	t.Parallel()
	storetest.RunSync(t, func(t *testing.T) func() store.Store {
		url := pgtest.URL(t)
		return func() store.Store { return open(t, url, postgres.Options{}) }
	})
}
