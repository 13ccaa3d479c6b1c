package db

import (
	"reflect"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestFieldsFollowTheStruct: rows scanned by position go into fields(),
// in the order the statements select the columns, which is the struct's
// field order: every field, once, in order (but a field tagged db:"-",
// which no statement selects: DeliveryRow.Late).
func TestFieldsFollowTheStruct(t *testing.T) {
	t.Parallel()
	var r DeliveryRow
	requireFieldsInOrder(t, &r, r.fields())
	var e Execution
	requireFieldsInOrder(t, &e, e.fields())
	require.Len(t, strings.Split(executionColumns, ","), reflect.TypeFor[Execution]().NumField(),
		"executionColumns lists every field")
	var a AuditRecord
	requireFieldsInOrder(t, &a, a.fields())
	require.Len(t, strings.Split(auditColumns, ","), reflect.TypeFor[AuditRecord]().NumField(),
		"auditColumns lists every field")
}

func requireFieldsInOrder(t *testing.T, structPtr any, fields []any) {
	t.Helper()
	var want []uintptr
	var walk func(v reflect.Value)
	walk = func(v reflect.Value) {
		for i := range v.NumField() {
			if v.Type().Field(i).Anonymous {
				walk(v.Field(i))
				continue
			}
			if v.Type().Field(i).Tag.Get("db") == "-" {
				continue
			}
			want = append(want, v.Field(i).Addr().Pointer())
		}
	}
	walk(reflect.ValueOf(structPtr).Elem())
	// By address: pointers to two zero fields of one type are DeepEqual.
	got := make([]uintptr, len(fields))
	for i, p := range fields {
		got[i] = reflect.ValueOf(p).Pointer()
	}
	require.Equal(t, want, got)
}
