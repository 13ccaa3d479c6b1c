package axproc

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain checks that no goroutine (a process's output copier) outlives
// the tests.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
