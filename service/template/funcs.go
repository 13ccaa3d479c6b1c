package template

import (
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"math"
	"net/url"
	"reflect"
	"strconv"
	"strings"
	"time"
)

// Functions are the functions a template may call besides
// text/template's built-ins, in documentation order.
var Functions = []string{"date_add", "date_format", "json", "default"}

// stubFuncs name every function for the parser (which checks that a
// called function exists); a render binds the real ones (renderer.funcs).
var stubFuncs = (&renderer{}).funcs()

// funcs returns the functions of one render, bound to its bounds. The
// built-ins that make strings (print, printf, println, html, js,
// urlquery) are replaced by bounded equivalents.
func (r *renderer) funcs() map[string]any {
	return map[string]any{
		"date_add":    dateAdd,
		"date_format": dateFormat,
		"json":        r.json,
		"default":     dflt,
		"print": func(args ...any) (string, error) {
			return r.bounded(args, func() string { return fmt.Sprint(args...) })
		},
		"println": func(args ...any) (string, error) {
			return r.bounded(args, func() string { return fmt.Sprintln(args...) })
		},
		"printf": r.printf,
		"html": func(args ...any) (string, error) {
			return r.bounded(args, func() string { return template.HTMLEscaper(args...) })
		},
		"js": func(args ...any) (string, error) {
			return r.bounded(args, func() string { return template.JSEscaper(args...) })
		},
		"urlquery": func(args ...any) (string, error) {
			return r.bounded(args, func() string { return url.QueryEscape(fmt.Sprint(args...)) })
		},
		valueFunc: r.capture,
		rangeFunc: r.countRange,
	}
}

// capture keeps the value of a single-action string and prints nothing.
func (r *renderer) capture(v any) string {
	r.captured, r.value = true, v
	return ""
}

// countRange passes a range's value through, counting its iterations
// against RangeMax.
func (r *renderer) countRange(v any) (any, error) {
	n := 0
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Slice, reflect.Array, reflect.Map:
		n = rv.Len()
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		n = int(min(max(rv.Int(), 0), RangeMax+1))
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		n = int(min(rv.Uint(), RangeMax+1))
	case reflect.Invalid:
	default:
		return nil, fmt.Errorf("range over a %T", v)
	}
	r.ranged += n
	if r.ranged > RangeMax {
		return nil, fmt.Errorf("the ranges of one payload iterate more than %d times", RangeMax)
	}
	return v, nil
}

// bounded returns mk() unless the strings among args, or the result,
// are over the render's bound.
func (r *renderer) bounded(args []any, mk func() string) (string, error) {
	total := 0
	for _, a := range args {
		if s, ok := a.(string); ok {
			total += len(s)
		}
	}
	if total > r.max {
		return "", fmt.Errorf("%w (more than %d bytes)", ErrTooLarge, r.max)
	}
	s := mk()
	if len(s) > r.max {
		return "", fmt.Errorf("%w (more than %d bytes)", ErrTooLarge, r.max)
	}
	return s, nil
}

// printf is fmt.Sprintf bounded: no '*' width and no width or precision
// above 1000 (fmt would pad before anything could check), then bounded.
func (r *renderer) printf(format string, args ...any) (string, error) {
	if err := checkVerbs(format); err != nil {
		return "", err
	}
	return r.bounded(append(args, format), func() string { return fmt.Sprintf(format, args...) })
}

func checkVerbs(format string) error {
	for i := 0; i < len(format); i++ {
		if format[i] != '%' {
			continue
		}
		for i++; i < len(format); i++ {
			c := format[i]
			if c == '*' {
				return errors.New("'*' widths are not supported")
			}
			if c >= '0' && c <= '9' {
				j := i
				for j < len(format) && format[j] >= '0' && format[j] <= '9' {
					j++
				}
				if n, err := strconv.Atoi(format[i:j]); err != nil || n > 1000 {
					return errors.New("widths and precisions are at most 1000")
				}
				i = j - 1
				continue
			}
			if !strings.ContainsRune("+-# .[]", rune(c)) {
				break // the verb
			}
		}
	}
	return nil
}

// json is v's JSON text.
func (r *renderer) json(v any) (string, error) {
	b, err := marshal(v)
	if err != nil {
		return "", err
	}
	if len(b) > r.max {
		return "", fmt.Errorf("%w (more than %d bytes)", ErrTooLarge, r.max)
	}
	return string(b), nil
}

// dflt is def when given is absent or empty (null, "", an empty array
// or object), else given: `{{ .x | default "none" }}`.
func dflt(def any, given ...any) any {
	if len(given) == 0 {
		return def
	}
	switch v := given[0].(type) {
	case nil:
		return def
	case string:
		if v == "" {
			return def
		}
	case []any:
		if len(v) == 0 {
			return def
		}
	case map[string]any:
		if len(v) == 0 {
			return def
		}
	}
	return given[0]
}

// dateAdd adds days to a date (YYYY-MM-DD, giving a date) or to an RFC
// 3339 time (giving one, in its own offset).
func dateAdd(v any, days any) (string, error) {
	n, err := toInt(days)
	if err != nil {
		return "", fmt.Errorf("the days %w", err)
	}
	if n > 1_000_000 || n < -1_000_000 {
		return "", errors.New("at most a million days either way")
	}
	t, dateOnly, err := toTime(v)
	if err != nil {
		return "", err
	}
	if dateOnly {
		return t.AddDate(0, 0, n).Format(time.DateOnly), nil
	}
	return t.AddDate(0, 0, n).Format(time.RFC3339Nano), nil
}

// dateFormat formats a date or an RFC 3339 time by layout, whose yyyy,
// MM, dd, HH, mm and ss are the year, month, day, hour, minute and
// second (zero-padded); every other character is itself.
func dateFormat(v any, layout string) (string, error) {
	t, _, err := toTime(v)
	if err != nil {
		return "", err
	}
	if len(layout) > 256 {
		return "", errors.New("the layout is longer than 256 bytes")
	}
	b := make([]byte, 0, len(layout)+8)
	for i := 0; i < len(layout); {
		rest := layout[i:]
		switch {
		case strings.HasPrefix(rest, "yyyy"):
			b = appendPadded(b, t.Year(), 4)
			i += 4
		case strings.HasPrefix(rest, "MM"):
			b = appendPadded(b, int(t.Month()), 2)
			i += 2
		case strings.HasPrefix(rest, "dd"):
			b = appendPadded(b, t.Day(), 2)
			i += 2
		case strings.HasPrefix(rest, "HH"):
			b = appendPadded(b, t.Hour(), 2)
			i += 2
		case strings.HasPrefix(rest, "mm"):
			b = appendPadded(b, t.Minute(), 2)
			i += 2
		case strings.HasPrefix(rest, "ss"):
			b = appendPadded(b, t.Second(), 2)
			i += 2
		default:
			b = append(b, layout[i])
			i++
		}
	}
	return string(b), nil
}

// appendPadded appends n as fmt's %0<width>d does.
func appendPadded(b []byte, n, width int) []byte {
	if n < 0 {
		return fmt.Appendf(b, "%0*d", width, n)
	}
	digits := 1
	for p := 10; n >= p && digits < width; p *= 10 {
		digits++
	}
	for ; digits < width; digits++ {
		b = append(b, '0')
	}
	return strconv.AppendInt(b, int64(n), 10)
}

// toTime reads a date (YYYY-MM-DD: dateOnly) or an RFC 3339 time.
func toTime(v any) (t time.Time, dateOnly bool, err error) {
	switch v := v.(type) {
	case time.Time:
		return v, false, nil
	case string:
		if t, err := time.Parse(time.DateOnly, v); err == nil {
			return t, true, nil
		}
		if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
			return t, false, nil
		}
		return time.Time{}, false, fmt.Errorf("%q is neither a date (YYYY-MM-DD) nor an RFC 3339 time", v)
	default:
		return time.Time{}, false, fmt.Errorf("%v (%T) is neither a date (YYYY-MM-DD) nor an RFC 3339 time", v, v)
	}
}

// toInt reads a whole number.
func toInt(v any) (int, error) {
	switch v := v.(type) {
	case json.Number:
		n, err := v.Int64()
		if err != nil {
			return 0, fmt.Errorf("%s are not a whole number", v)
		}
		return int(max(min(n, math.MaxInt32), math.MinInt32)), nil
	case string:
		n, err := strconv.Atoi(v)
		if err != nil {
			return 0, fmt.Errorf("%q are not a whole number", v)
		}
		return n, nil
	case float64:
		if v != math.Trunc(v) || math.Abs(v) > math.MaxInt32 {
			return 0, fmt.Errorf("%v are not a whole number", v)
		}
		return int(v), nil
	}
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return int(max(min(rv.Int(), math.MaxInt32), math.MinInt32)), nil
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return int(min(rv.Uint(), math.MaxInt32)), nil
	}
	return 0, fmt.Errorf("%v (%T) are not a whole number", v, v)
}
