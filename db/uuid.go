package db

import (
	"fmt"

	"github.com/google/uuid"
)

// uuidArray converts ids for a uuid[] parameter. pgx encodes a []string
// for uuid[] only after its binary encoding has failed with a formatted
// error, which the batched statements paid for every call; 16-byte arrays
// encode directly.
func uuidArray(ids []string) ([][16]byte, error) {
	out := make([][16]byte, len(ids))
	for i, s := range ids {
		u, err := uuid.Parse(s)
		if err != nil {
			return nil, wrap(fmt.Sprintf("id %q", s), err)
		}
		out[i] = u
	}
	return out, nil
}
