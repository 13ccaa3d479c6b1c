// Package resource holds what every resource of the service shares: its
// id, a UUIDv7 (NewID), the pages of newest-first lists that page on it
// (Page), the form of a name and of labels (NamePattern, CheckLabels). Package service and its subpackages use it; service
// re-exports Page, ClampLimit and NewID.
package resource

import "github.com/google/uuid"

// NewID returns a new resource id: a UUIDv7, so ids sort by creation time
// and list pagination can use them as a stable cursor.
func NewID() string {
	return uuid.Must(uuid.NewV7()).String()
}
