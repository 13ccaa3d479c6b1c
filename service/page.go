package service

import "github.com/axhq/ax/service/resource"

// List page sizes (resource.PageLimitDefault, resource.PageLimitMax).
const (
	PageLimitDefault = resource.PageLimitDefault
	PageLimitMax     = resource.PageLimitMax
)

// Page selects one page of a newest-first list (resource.Page).
type Page = resource.Page

// ClampLimit turns a requested page size into one in 1..PageLimitMax; 0
// means the default (resource.ClampLimit).
func ClampLimit(n int) int { return resource.ClampLimit(n) }

// NewID returns a new resource id, a UUIDv7 (resource.NewID).
func NewID() string { return resource.NewID() }

func validID(id string) bool { return resource.ValidID(id) }

func pageOf[R, T any](rows []R, limit int, convert func(R) T, id func(T) string) ([]T, string) {
	return resource.PageOf(rows, limit, convert, id)
}
