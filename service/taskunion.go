package service

import (
	"github.com/axhq/ax/service/schedule"
	"github.com/axhq/ax/service/union"
)

// unionSpec reads a stored union schedule back (union.Spec).
func unionSpec(doc *string) (schedule.Spec, bool) { return union.Spec(doc) }
