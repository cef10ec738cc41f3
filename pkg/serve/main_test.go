package serve_test

import (
	"runtime"
	"testing"

	"github.com/evfwd/evfwd/internal/testmain"
)

// Many tests here wait on real time: the faults of PostgreSQL, a full
// disk, restarts.
func TestMain(m *testing.M) {
	testmain.Parallel(2 * runtime.GOMAXPROCS(0))
	testmain.Run(m)
}
