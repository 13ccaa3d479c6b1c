package service

import (
	"github.com/axhq/ax/db"
	"github.com/axhq/ax/service/stats"
)

// StatsWindowDefault is the window of a stats summary when none is given
// (stats.WindowDefault).
const StatsWindowDefault = stats.WindowDefault

type (
	// Stats summarises a tenant's activity (service/stats).
	Stats = stats.Reader
	// TenantStats is a tenant's activity over a window ending now.
	TenantStats = stats.Summary
	// StatsSeries is a tenant's executions over a window, step by step.
	StatsSeries = stats.Series
	// StatsBucket counts the executions created in one step.
	StatsBucket = stats.Bucket
	// QueueDepth is the number of River jobs of a queue in a state.
	QueueDepth = stats.QueueDepth
	// Percentiles summarise samples in milliseconds.
	Percentiles = stats.Percentiles
)

// NewStats returns a Stats backed by pool.
func NewStats(pool *db.Pool) *Stats { return stats.New(pool) }
