package service

import "github.com/axhq/ax/service/jsondoc"

// checkJSONDocument refuses request JSON held as a jsonb document that
// holds U+0000 (jsondoc.Check).
func checkJSONDocument(ve *ValidationError, field string, raw []byte) { jsondoc.Check(ve, field, raw) }

func jsonEqual(a, b any) bool { return jsondoc.Equal(a, b) }
