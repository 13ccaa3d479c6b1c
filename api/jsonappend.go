package api

import (
	"strconv"
	"time"
	"unicode/utf8"
)

// jsonAppender is a response that writes its own JSON, byte for byte as
// encoding/json writes it (jsonSerializer's default: HTML characters
// escaped), without encoding/json's reflection: for a page of fifty
// executions that reflection was a third of the list request's CPU.
// TestAppendersMatchEncodingJSON holds every appender to encoding/json's
// output, field by field.
type jsonAppender interface {
	// appendJSON appends the JSON to b; false means this value needs
	// encoding/json (b is then to be discarded).
	appendJSON(b []byte) ([]byte, bool)
}

// appendJSON implements jsonAppender.
func (l executionList) appendJSON(b []byte) ([]byte, bool) {
	b = append(b, `{"items":`...)
	if l.Items == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, '[')
		for i := range l.Items {
			if i > 0 {
				b = append(b, ',')
			}
			var ok bool
			if b, ok = l.Items[i].appendJSON(b); !ok {
				return b, false
			}
		}
		b = append(b, ']')
	}
	if l.NextCursor != "" {
		b = append(b, `,"next_cursor":`...)
		b = appendJSONString(b, l.NextCursor)
	}
	return append(b, '}'), true
}

// appendJSON writes an execution without events, output or progress (as
// lists return them); one with any is left to encoding/json.
func (x *executionResponse) appendJSON(b []byte) ([]byte, bool) {
	if len(x.Events) > 0 || len(x.Output) > 0 || len(x.Progress) > 0 {
		return b, false
	}
	ok := true
	b = append(b, `{"id":`...)
	b = appendJSONString(b, x.ID)
	if x.TaskID != "" {
		b = append(b, `,"task_id":`...)
		b = appendJSONString(b, x.TaskID)
	}
	b = append(b, `,"scheduled_for":`...)
	b = appendTimestamp(b, x.ScheduledFor, &ok)
	b = append(b, `,"trigger":`...)
	b = appendJSONString(b, x.Trigger)
	if x.DedupKey != "" {
		b = append(b, `,"dedup_key":`...)
		b = appendJSONString(b, x.DedupKey)
	}
	b = append(b, `,"state":`...)
	b = appendJSONString(b, x.State)
	b = append(b, `,"attempts":`...)
	b = strconv.AppendInt(b, int64(x.Attempts), 10)
	b = append(b, `,"round":`...)
	b = strconv.AppendInt(b, int64(x.Round), 10)
	if x.BackfillID != "" {
		b = append(b, `,"backfill_id":`...)
		b = appendJSONString(b, x.BackfillID)
	}
	if x.EventID != "" {
		b = append(b, `,"event_id":`...)
		b = appendJSONString(b, x.EventID)
	}
	if x.WorkflowID != "" {
		b = append(b, `,"workflow_id":`...)
		b = appendJSONString(b, x.WorkflowID)
	}
	if x.WorkflowRunID != "" {
		b = append(b, `,"workflow_run_id":`...)
		b = appendJSONString(b, x.WorkflowRunID)
	}
	if x.Node != "" {
		b = append(b, `,"node":`...)
		b = appendJSONString(b, x.Node)
	}
	b = append(b, `,"shard":`...)
	b = strconv.AppendInt(b, int64(x.Shard), 10)
	b = append(b, `,"late":`...)
	b = strconv.AppendBool(b, x.Late)
	b = append(b, `,"held":`...)
	b = strconv.AppendBool(b, x.Held)
	if x.CancelRequested {
		b = append(b, `,"cancel_requested":true`...)
	}
	b = append(b, `,"last_status_code":`...)
	if x.LastStatusCode == nil {
		b = append(b, "null"...)
	} else {
		b = strconv.AppendInt(b, int64(*x.LastStatusCode), 10)
	}
	b = append(b, `,"last_error":`...)
	if x.LastError == nil {
		b = append(b, "null"...)
	} else {
		b = appendJSONString(b, *x.LastError)
	}
	if x.ErrorClass != "" {
		b = append(b, `,"error_class":`...)
		b = appendJSONString(b, x.ErrorClass)
	}
	if x.NextAttemptAt != nil {
		b = append(b, `,"next_attempt_at":`...)
		b = appendTimestamp(b, *x.NextAttemptAt, &ok)
	}
	b = append(b, `,"created_at":`...)
	b = appendTimestamp(b, x.CreatedAt, &ok)
	b = append(b, `,"started_at":`...)
	b = appendOptionalTimestamp(b, x.StartedAt, &ok)
	b = append(b, `,"finished_at":`...)
	b = appendOptionalTimestamp(b, x.FinishedAt, &ok)
	return append(b, '}'), ok
}

// appendTimestamp writes t as its MarshalText does (time.Time's
// AppendText is the same code); a time it refuses (a year outside
// 0–9999) clears ok, so that encoding/json reports the error.
func appendTimestamp(b []byte, t timestamp, ok *bool) []byte {
	out, err := time.Time(t).AppendText(append(b, '"'))
	if err != nil {
		*ok = false
		return b
	}
	return append(out, '"')
}

func appendOptionalTimestamp(b []byte, t *timestamp, ok *bool) []byte {
	if t == nil {
		return append(b, "null"...)
	}
	return appendTimestamp(b, *t, ok)
}

const hexDigits = "0123456789abcdef"

// appendJSONString writes s as encoding/json does with HTML escaping:
// quotes, backslashes and control characters escaped (\b, \f, \n, \r, \t
// by name), <, > and & as \u003c, \u003e, \u0026, invalid UTF-8 as
// \ufffd, and U+2028 and U+2029 escaped.
func appendJSONString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
