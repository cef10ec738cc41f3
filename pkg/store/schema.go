package store

import (
	"errors"
	"fmt"

	"github.com/evfwd/evfwd/internal/version"
)

// ErrSchemaNewer means the store's schema was migrated by a newer evfwd
// than the one opening it. Opening refuses such a store before changing
// anything in it: an older evfwd does not know what the newer migrations
// changed, so it must not write there. Test for it with errors.Is, or use
// errors.As with *SchemaError for the versions.
var ErrSchemaNewer = errors.New("store: schema is newer than this evfwd knows")

// SchemaError is the error Open returns for a store whose schema is newer
// than this build knows. It is ErrSchemaNewer (errors.Is).
type SchemaError struct {
	Have int // the newest schema version the store records
	Know int // the newest schema version this build knows
}

func (e *SchemaError) Error() string {
	return fmt.Sprintf("schema version %d is newer than this evfwd knows (%d): a newer evfwd migrated this store, "+
		"and this one (%s) left it unchanged; upgrade evfwd (on every node, in a rolling upgrade) or use a store of its own",
		e.Have, e.Know, version.Version())
}

// Is makes errors.Is(err, ErrSchemaNewer) hold.
func (e *SchemaError) Is(target error) bool { return target == ErrSchemaNewer }

// CheckSchema returns a *SchemaError when have, the newest version a store
// records, is above know, the newest version this build migrates to.
func CheckSchema(have, know int) error {
	if have > know {
		return &SchemaError{Have: have, Know: know}
	}
	return nil
}
