package service

import "github.com/google/uuid"

// NewID returns a new resource id: a UUIDv7, so ids sort by creation time
// and list pagination can use them as a stable cursor.
func NewID() string {
	return uuid.Must(uuid.NewV7()).String()
}
