package queued_test

import (
	"testing"

	"github.com/evfwd/evfwd/internal/testmain"
)

func TestMain(m *testing.M) { testmain.Run(m) }
