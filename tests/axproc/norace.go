//go:build !race

package axproc

// RaceEnabled reports whether this program was built with -race: the
// tests then build ax with it too (a data race in the server fails the
// test that drove it).
const RaceEnabled = false
