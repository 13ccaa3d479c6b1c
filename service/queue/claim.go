package queue

import (
	"context"

	"github.com/axhq/ax/db"
	"github.com/axhq/ax/service/errs"
)

// Claim takes, in tx, the deliver jobs ids for the River client client of
// this process, as River's fetch would for one of its workers
// (db.ClaimJobs): once tx commits, the process works them itself, at once,
// instead of waiting for River's next fetch, and River leaves them alone
// while they run. It returns the ids taken.
//
// A claimed job is still River's durable record: the process ends it
// (EndClaimed) once its attempt is over; when the process dies first,
// the job is running under a dead replica's client and is resumed as any
// job it fetched (db.ResumeJobsOf).
func (e *Enqueuer) Claim(ctx context.Context, tx db.Tx, ids []int64, client string) ([]int64, error) {
	got, err := db.ClaimJobs(ctx, tx, ids, client)
	return got, errs.Store(err, "claim jobs")
}

// EndClaimed ends jobs Claim took (db.EndClaimedJobs): completed ones
// completed, released ones back to River as they were before the claim
// (available, their attempt as it was), for River to run.
func (e *Enqueuer) EndClaimed(ctx context.Context, completed, released []int64) error {
	return errs.Store(db.EndClaimedJobs(ctx, e.pool, completed, released), "end claimed jobs")
}
