package service

import "github.com/axhq/ax/service/dbclock"

// DBClock estimates the database's clock from this process's
// (dbclock.Clock); a nil *DBClock is this process's clock.
type DBClock = dbclock.Clock
