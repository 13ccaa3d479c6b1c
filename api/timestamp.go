package api

import "time"

// timestamp is a time in a response: RFC 3339 with the time's own offset,
// as time.Time renders it (ax's times are UTC). It marshals as text
// because encoding/json runs every MarshalJSON result through its JSON
// validator again: for the five times of each of fifty executions on a
// page that was a tenth of the list request's CPU.
type timestamp time.Time

// MarshalText implements encoding.TextMarshaler.
func (t timestamp) MarshalText() ([]byte, error) { return time.Time(t).MarshalText() }

// UnmarshalText implements encoding.TextUnmarshaler.
func (t *timestamp) UnmarshalText(b []byte) error { return (*time.Time)(t).UnmarshalText(b) }

func stamp(t time.Time) timestamp { return timestamp(t) }

// stampPtr converts an optional time; nil stays nil.
func stampPtr(t *time.Time) *timestamp {
	if t == nil {
		return nil
	}
	s := timestamp(*t)
	return &s
}
