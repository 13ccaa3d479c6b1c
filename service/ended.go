package service

import "github.com/axhq/ax/service/metrics"

// ended counts the executions one transaction moved to a final state
// (succeeded, failed, cancelled, skipped), by state: ax_executions_finished_total's
// one source. Every statement that ends executions adds what it changed —
// the row-by-row and batched outcomes of attempts, a start that ends one
// without sending, a callback's completion or timeout, a cancel, the
// pending executions a pause, a delete, a schedule change, an auto-pause,
// a backfill's or a run's cancel ends, a skipped slot, a workflow node
// its run's advance fails unsent (runEngine.tallying) — from its
// RowsAffected or returned rows, and the caller reports the tally once the
// transaction committed: a transaction rolled back counts nothing, and no
// execution is counted twice.
type ended map[string]int

// add counts n executions moved to state.
func (e *ended) add(state string, n int64) {
	if n <= 0 {
		return
	}
	if *e == nil {
		*e = ended{}
	}
	(*e)[state] += int(n)
}

// report adds the tally to ax_executions_finished_total (m nil: nothing)
// and clears it, so that nothing is reported twice and a result that
// carried it compares equal whatever path made it. Call it after the
// transaction committed.
func (e *ended) report(m *metrics.Metrics) {
	for state, n := range *e {
		m.ExecutionsFinished(state, n)
	}
	*e = nil
}
