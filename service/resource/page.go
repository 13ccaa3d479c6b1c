package resource

import (
	"github.com/google/uuid"

	"github.com/axhq/ax/service/errs"
)

// List page sizes.
const (
	PageLimitDefault = 50
	PageLimitMax     = 500
)

// Page selects one page of a newest-first list.
type Page struct {
	// After is the id of the last item of the previous page; "" for the first.
	After string
	// Limit is the page size, already clamped by the caller (ClampLimit).
	Limit int
}

// ClampLimit turns a requested page size into one in 1..PageLimitMax; 0
// means the default.
func ClampLimit(n int) int {
	switch {
	case n <= 0:
		return PageLimitDefault
	case n > PageLimitMax:
		return PageLimitMax
	}
	return n
}

// PageOf converts a result fetched with limit+1 rows, trims it to limit and
// returns the cursor of the next page, "" when this is the last.
func PageOf[R, T any](rows []R, limit int, convert func(R) T, id func(T) string) ([]T, string) {
	more := len(rows) > limit
	if more {
		rows = rows[:limit]
	}
	items := make([]T, 0, len(rows))
	for _, r := range rows {
		items = append(items, convert(r))
	}
	if !more || len(items) == 0 {
		return items, ""
	}
	return items, id(items[len(items)-1])
}

// ValidID reports whether id can name a resource; anything else is simply
// not found.
func ValidID(id string) bool {
	_, err := uuid.Parse(id)
	return err == nil && len(id) == 36
}

// Check rejects a cursor that cannot have come from this API.
func (p Page) Check() error {
	if p.After != "" && !ValidID(p.After) {
		return errs.Field("cursor", "is not a cursor returned by this API")
	}
	return nil
}
