package storeurl_test

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/evfwd/evfwd/pkg/store/postgres/pgtest"
	"github.com/evfwd/evfwd/pkg/storeurl"
	"github.com/google/go-cmp/cmp"
)

func TestParse(t *testing.T) {
	for _, tt := range []struct {
		url     string
		want    storeurl.Location
		wantErr string
	}{
		{url: "sqlite:///var/lib/evfwd.db", want: storeurl.Location{Engine: storeurl.SQLite, Path: "/var/lib/evfwd.db"}},
		{url: "sqlite://rel/evfwd.db", want: storeurl.Location{Engine: storeurl.SQLite, Path: "rel/evfwd.db"}},
		{url: "sqlite:evfwd.db", want: storeurl.Location{Engine: storeurl.SQLite, Path: "evfwd.db"}},
		{url: "file:evfwd.db", want: storeurl.Location{Engine: storeurl.SQLite, Path: "evfwd.db"}},
		{url: "/var/lib/evfwd.db", want: storeurl.Location{Engine: storeurl.SQLite, Path: "/var/lib/evfwd.db"}},
		{url: "postgres://u:p@db/evfwd", want: storeurl.Location{Engine: storeurl.PostgreSQL, URL: "postgres://u:p@db/evfwd"}},
		{url: "postgresql://db/evfwd", want: storeurl.Location{Engine: storeurl.PostgreSQL, URL: "postgresql://db/evfwd"}},
		// Parse leaves the driver's reading of a PostgreSQL URL to Check.
		{url: "postgres://db:notaport/evfwd", want: storeurl.Location{Engine: storeurl.PostgreSQL, URL: "postgres://db:notaport/evfwd"}},
		{url: "mysql://db/evfwd", wantErr: `store "mysql://db/evfwd": unknown scheme (want sqlite:///path or postgres://...)`},
		{url: "sqlite://", wantErr: "store: empty path"},
		{url: "", wantErr: "store: empty path"},
	} {
		got, err := storeurl.Parse(tt.url)
		if tt.wantErr != "" {
			if err == nil || err.Error() != tt.wantErr {
				t.Errorf("Parse(%q) = %+v, %v; want error %q", tt.url, got, err, tt.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("Parse(%q): %v", tt.url, err)
		}
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("Parse(%q) mismatch (-want +got):\n%s", tt.url, diff)
		}
	}
}

func TestCheck(t *testing.T) {
	for url, ok := range map[string]bool{
		"sqlite:///var/lib/evfwd.db": true, "/var/lib/evfwd.db": true, "file:evfwd.db": true,
		"postgres://u:p@db:5432/evfwd": true, "postgresql://db/evfwd?search_path=x": true,
		"postgres://db:notaport/evfwd": false, "mysql://db/evfwd": false, "sqlite://": false,
	} {
		if err := storeurl.Check(url); (err == nil) != ok {
			t.Errorf("Check(%q) = %v, want ok %v", url, err, ok)
		}
	}
	// The driver's own error may quote the password.
	if err := storeurl.Check("postgres://u:hunter2@db:notaport/evfwd"); err == nil || strings.Contains(err.Error(), "hunter2") {
		t.Errorf("Check of a bad URL with a password: %v", err)
	}
}

func TestOpenSQLite(t *testing.T) {
	dir := t.TempDir()
	for _, url := range []string{"sqlite://" + filepath.Join(dir, "a", "evfwd.db"), "file:" + filepath.Join(dir, "b.db"), filepath.Join(dir, "c.db")} {
		st, err := storeurl.Open(context.Background(), url, storeurl.Options{NoRecover: true})
		if err != nil {
			t.Fatalf("Open(%q): %v", url, err)
		}
		if _, err := st.Counts(context.Background()); err != nil {
			t.Errorf("%s: Counts: %v", url, err)
		}
		if err := st.Close(); err != nil {
			t.Errorf("%s: Close: %v", url, err)
		}
	}
	for _, name := range []string{"a/evfwd.db", "b.db", "c.db"} {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			t.Errorf("not created: %v", err)
		}
	}
	if st, err := storeurl.Open(context.Background(), "mysql://db/evfwd", storeurl.Options{}); st != nil || err == nil {
		t.Errorf("Open of an unknown scheme = %v, %v; want nil and an error", st, err)
	}
}

func TestOpenPostgreSQL(t *testing.T) {
	url := pgtest.URL(t)
	st, err := storeurl.Open(context.Background(), url, storeurl.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if !strings.HasPrefix(st.Path(), "postgres://") {
		t.Errorf("Path() = %q", st.Path())
	}
	if _, err := st.Counts(context.Background()); err != nil {
		t.Error(err)
	}
}

func TestOpenMustExist(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	missing := filepath.Join(dir, "state", "evfwd.db")
	st, err := storeurl.Open(ctx, "sqlite://"+missing, storeurl.Options{MustExist: true})
	if st != nil || !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), missing) {
		t.Errorf("Open of a missing file with MustExist = %v, %v; want nil and fs.ErrNotExist naming the path", st, err)
	}
	// Nothing made on the way: neither the file nor its directory.
	if _, err := os.Stat(filepath.Dir(missing)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("directory of the refused store: %v, want it absent", err)
	}

	existing := filepath.Join(dir, "evfwd.db")
	st, err = storeurl.Open(ctx, existing, storeurl.Options{})
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	st, err = storeurl.Open(ctx, existing, storeurl.Options{MustExist: true, NoRecover: true})
	if err != nil {
		t.Fatalf("Open of an existing file with MustExist: %v", err)
	}
	st.Close()
}
