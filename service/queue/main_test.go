package queue_test

import (
	"testing"

	"github.com/axhq/ax/db/dbtest"
)

// TestMain gives the package's database tests a throwaway Postgres (see
// db/dbtest) and fails the package when a goroutine outlives its tests.
func TestMain(m *testing.M) { dbtest.Main(m) }
