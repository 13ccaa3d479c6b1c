package db

import "github.com/jackc/pgx/v5"

// positional is a row type whose fields() lists pointers to its fields in
// the order its statements select the columns (TestFieldsFollowTheStruct).
// Scanning by position skips pgx's per-row matching of column names to
// struct tags, a quarter of a list request's CPU.
type positional[T any] interface {
	*T
	fields() []any
}

// collectRows scans every row into a T, by position.
func collectRows[T any, P positional[T]](rows pgx.Rows, capacity int) ([]T, error) {
	out := make([]T, 0, max(capacity, 0))
	var v T
	_, err := pgx.ForEachRow(rows, P(&v).fields(), func() error {
		out = append(out, v)
		var zero T
		v = zero
		return nil
	})
	if err != nil {
		return nil, translate(err)
	}
	return out, nil
}

// collectOneRow scans exactly one row into a T, by position; no row is
// ErrNotFound.
func collectOneRow[T any, P positional[T]](rows pgx.Rows, err error) (T, error) {
	return exactlyOne(rows, err, func(row pgx.CollectableRow) (T, error) {
		var v T
		err := row.Scan(P(&v).fields()...)
		return v, err
	})
}
