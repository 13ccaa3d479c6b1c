package jobs

import (
	"testing"

	"github.com/axhq/ax/db/dbtest"
)

// TestMain gives the package's database tests a throwaway Postgres (see
// db/dbtest). It is the package's only TestMain.
func TestMain(m *testing.M) { dbtest.Main(m) }
