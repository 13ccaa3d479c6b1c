// Package jsondoc holds the rules of the request JSON that ax keeps as a
// jsonb document.
package jsondoc

import (
	"bytes"
	"encoding/json"
	"strings"

	"github.com/axhq/ax/service/errs"
)

// nulEscape is how U+0000 appears in JSON text: control characters are
// always escaped in a JSON string.
var nulEscape = []byte(`\u0000`)

// Check refuses, as a field error on field, request JSON that
// ax keeps as a jsonb document and that holds U+0000 (\u0000) in a string
// or a key: Postgres cannot store that character in jsonb (SQLSTATE
// 22P05), and the request would fail with a 500 (a completion so refused
// would leave its attempt running until the callback timeout). Every
// request value stored as jsonb passes here: a workflow node's payload, a
// heartbeat's progress, a completion's output. A task's payload is stored
// as bytes and keeps the character; strings and maps of strings (labels,
// headers) are checked where they are decoded.
func Check(ve *errs.ValidationError, field string, raw []byte) {
	if HasNUL(raw) {
		ve.Add(field, `must not contain U+0000 (\u0000) in a string or a key: ax stores it as a JSON document, `+
			`which cannot hold that character`)
	}
}

// HasNUL reports whether the JSON text raw has a string or a key that
// holds U+0000. Invalid JSON is not its business (false).
func HasNUL(raw []byte) bool {
	if !bytes.Contains(raw, nulEscape) {
		return false // the common case: no need to decode
	}
	// The bytes \u0000 may be the text "\\u0000" (an escaped backslash):
	// decode the strings to tell.
	dec := json.NewDecoder(bytes.NewReader(raw))
	for {
		tok, err := dec.Token()
		if err != nil { // the end, or not JSON: validated elsewhere
			return false
		}
		if s, ok := tok.(string); ok && strings.IndexByte(s, 0) >= 0 {
			return true
		}
	}
}

// Equal reports whether a and b encode to the same JSON.
func Equal(a, b any) bool {
	x, errX := json.Marshal(a)
	y, errY := json.Marshal(b)
	return errX == nil && errY == nil && bytes.Equal(x, y)
}
