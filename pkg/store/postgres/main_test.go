package postgres_test

import (
	"runtime"
	"testing"

	"github.com/evfwd/evfwd/internal/testmain"
)

// Some tests here wait on real time: a slow link, a cut one.
func TestMain(m *testing.M) {
	testmain.Parallel(2 * runtime.GOMAXPROCS(0))
	testmain.Run(m)
}
