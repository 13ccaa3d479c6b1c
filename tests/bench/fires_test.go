package main

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestFireCounter: counting in steps, reading only what arrived since the
// last count, gives the distinct fires (task, and shard) of every request
// so far: a redelivery or a second execution of a fire counts once, each
// shard of a task counts apart.
func TestFireCounter(t *testing.T) {
	r := &receiver{}
	arrive := func(ds ...delivery) {
		for _, d := range ds {
			r.record(d)
		}
	}
	var c fireCounter
	require.Equal(t, 0, c.count(r))
	arrive(delivery{task: "a", exec: "1"}, delivery{task: "b", exec: "2"})
	require.Equal(t, 2, c.count(r))
	require.Equal(t, 2, c.count(r), "nothing new")
	arrive(delivery{task: "a", exec: "1"}, delivery{task: "a", exec: "3"}) // a redelivery, a double fire
	require.Equal(t, 2, c.count(r))
	arrive(delivery{task: "c", shard: "0"}, delivery{task: "c", shard: "1"}, delivery{task: "c", shard: "1"})
	require.Equal(t, 4, c.count(r))
	require.Len(t, r.snapshot(), 7, "the receiver keeps every request")
}
