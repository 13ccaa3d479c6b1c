package api

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// trickyString needs every kind of escape encoding/json applies.
const trickyString = "q\"b\\s/<a href>&amp; \b\f\n\r\t\x00\x1f\x7f é \u2028\u2029 \xff\xfe end"

// sample returns a non-zero value of t, or fails: a field of a type this
// does not know must be taught to both the appender and this test.
func sample(t *testing.T, typ reflect.Type) reflect.Value {
	t.Helper()
	at := time.Date(2026, 12, 1, 9, 6, 5, 123456789, time.UTC)
	v := reflect.New(typ).Elem()
	switch typ {
	case reflect.TypeFor[string]():
		v.SetString(trickyString)
	case reflect.TypeFor[int]():
		v.SetInt(-42)
	case reflect.TypeFor[bool]():
		v.SetBool(true)
	case reflect.TypeFor[*int]():
		n := 503
		v.Set(reflect.ValueOf(&n))
	case reflect.TypeFor[*string]():
		s := trickyString + " (pointer)"
		v.Set(reflect.ValueOf(&s))
	case reflect.TypeFor[timestamp]():
		v.Set(reflect.ValueOf(stamp(at)))
	case reflect.TypeFor[*timestamp]():
		v.Set(reflect.ValueOf(stampPtr(&at)))
	case reflect.TypeFor[json.RawMessage]():
		v.Set(reflect.ValueOf(json.RawMessage(`{"rows":1}`)))
	case reflect.TypeFor[[]executionEventDTO]():
		v.Set(reflect.ValueOf([]executionEventDTO{{Type: "fired", At: stamp(at)}}))
	default:
		t.Fatalf("no sample value for a field of type %s", typ)
	}
	return v
}

// requireSameJSON checks that v's appender writes what encoding/json does.
func requireSameJSON(t *testing.T, v jsonAppender, what string) {
	t.Helper()
	want, err := json.Marshal(v)
	require.NoError(t, err, what)
	got, ok := v.appendJSON(nil)
	require.True(t, ok, what)
	require.Equal(t, string(want), string(got), what)
}

// Every field of an execution, alone and all together, written by the
// appender exactly as encoding/json writes it; a field added to the type
// fails here until the appender writes it too.
func TestAppendersMatchEncodingJSON(t *testing.T) {
	t.Parallel()
	typ := reflect.TypeFor[executionResponse]()
	var all executionResponse
	for i := range typ.NumField() {
		f := typ.Field(i)
		var one executionResponse
		reflect.ValueOf(&one).Elem().Field(i).Set(sample(t, f.Type))
		if f.Name == "Events" || f.Name == "Output" || f.Name == "Progress" {
			_, ok := one.appendJSON(nil)
			require.False(t, ok, "an execution with %s is left to encoding/json", f.Name)
			continue
		}
		reflect.ValueOf(&all).Elem().Field(i).Set(sample(t, f.Type))
		requireSameJSON(t, &one, "only "+f.Name)
	}
	requireSameJSON(t, &all, "every field")
	requireSameJSON(t, &executionResponse{}, "no field")

	code := 204
	item := executionResponse{ID: "0192c3a0-0000-7000-8000-000000000001", State: "succeeded", LastStatusCode: &code}
	for _, l := range []executionList{
		{},
		{Items: []executionResponse{}},
		{Items: []executionResponse{item}},
		{Items: []executionResponse{item, all, {}}, NextCursor: "eyJ0IjoiMjAyNi0xMi0wMSJ9"},
		{Items: []executionResponse{all}, NextCursor: trickyString},
	} {
		requireSameJSON(t, l, "a list")
	}
	withEvents := executionList{Items: []executionResponse{item, {Events: []executionEventDTO{{Type: "fired"}}}}}
	_, ok := withEvents.appendJSON(nil)
	require.False(t, ok, "a list item with events is left to encoding/json")
}

// The serializer's bytes are the Encoder's (trailing newline included),
// with an appender or without, and an error stays an error.
func TestEncodeJSONMatchesEncoder(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 12, 1, 9, 6, 5, 0, time.UTC)
	withEvents := executionList{Items: []executionResponse{{ID: "x", Events: []executionEventDTO{{Type: "fired", At: stamp(at)}}}}}
	for _, v := range []any{
		executionList{Items: []executionResponse{{ID: "a<b", CreatedAt: stamp(at)}}, NextCursor: "c"},
		withEvents,
		map[string]string{"k": trickyString},
	} {
		var want, got bytes.Buffer
		require.NoError(t, json.NewEncoder(&want).Encode(v))
		got.WriteString("kept ")
		require.NoError(t, encodeJSON(&got, v, ""))
		require.Equal(t, "kept "+want.String(), got.String())
	}

	var indented, want bytes.Buffer
	enc := json.NewEncoder(&want)
	enc.SetIndent("", "  ")
	require.NoError(t, enc.Encode(withEvents))
	require.NoError(t, encodeJSON(&indented, withEvents, "  "))
	require.Equal(t, want.String(), indented.String(), "indented output is encoding/json's")

	var buf bytes.Buffer
	bad := executionList{Items: []executionResponse{{CreatedAt: stamp(time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC))}}}
	require.Error(t, encodeJSON(&buf, bad, ""), "a year RFC 3339 cannot write is encoding/json's error")
	require.Zero(t, buf.Len())
}

func FuzzAppendJSONString(f *testing.F) {
	for _, s := range []string{"", "plain", trickyString, "\u2028", "\xe2\x80", "<>&", "\x00\x7f\x80"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want, err := json.Marshal(s)
		require.NoError(t, err)
		require.Equal(t, string(want), string(appendJSONString(nil, s)))
	})
}
