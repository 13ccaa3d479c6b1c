package db

import (
	"reflect"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestDeliveryRowFieldsFollowTheStruct: the batched start scans by
// position into DeliveryRow.fields(), in the order its SELECT lists the
// columns, which is the struct's field order: every field, once, in
// order.
func TestDeliveryRowFieldsFollowTheStruct(t *testing.T) {
	t.Parallel()
	var r DeliveryRow
	var want []any
	var walk func(v reflect.Value)
	walk = func(v reflect.Value) {
		for i := range v.NumField() {
			f := v.Field(i)
			if v.Type().Field(i).Anonymous {
				walk(f)
				continue
			}
			want = append(want, f.Addr().Interface())
		}
	}
	walk(reflect.ValueOf(&r).Elem())
	// By address: pointers to two zero fields of one type are DeepEqual.
	addrs := func(ps []any) []uintptr {
		out := make([]uintptr, len(ps))
		for i, p := range ps {
			out[i] = reflect.ValueOf(p).Pointer()
		}
		return out
	}
	require.Equal(t, addrs(want), addrs(r.fields()))
}
