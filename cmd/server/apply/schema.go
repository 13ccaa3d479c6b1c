package apply

import (
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/axhq/ax/openapi"
)

// A schema is one OpenAPI schema object, as decoded JSON.
type schema = map[string]any

// schemas are the API's component schemas by name, read from the OpenAPI
// document the binary embeds: the document format follows the API's
// create bodies without a hand-written copy of them.
var schemas = sync.OnceValue(func() map[string]schema {
	var doc struct {
		Components struct {
			Schemas map[string]schema `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(openapi.Spec(), &doc); err != nil {
		panic(fmt.Sprintf("apply: the embedded OpenAPI document: %v", err))
	}
	for name, s := range doc.Components.Schemas {
		s["x-name"] = name
	}
	return doc.Components.Schemas
})

// deref follows $ref and a lone allOf (a nullable reference), keeping
// the referring schema's nullable.
func deref(s schema) schema {
	for s != nil {
		if ref, ok := s["$ref"].(string); ok {
			s = schemas()[strings.TrimPrefix(ref, "#/components/schemas/")]
			continue
		}
		if all, ok := s["allOf"].([]any); ok && len(all) == 1 && s["properties"] == nil {
			inner, _ := all[0].(schema)
			out := deref(inner)
			if s["nullable"] == true {
				out = withNullable(out)
			}
			return out
		}
		return s
	}
	return nil
}

func withNullable(s schema) schema {
	out := make(schema, len(s)+1)
	for k, v := range s {
		out[k] = v
	}
	out["nullable"] = true
	return out
}

// pick chooses a oneOf member by its discriminator (a schedule's type);
// nil when v names none.
func pick(s schema, v any) schema {
	s = deref(s)
	if _, ok := s["oneOf"]; !ok {
		return s
	}
	disc, _ := s["discriminator"].(map[string]any)
	prop, _ := disc["propertyName"].(string)
	mapping, _ := disc["mapping"].(map[string]any)
	m, _ := v.(map[string]any)
	t, _ := m[prop].(string)
	ref, ok := mapping[t].(string)
	if !ok {
		return nil
	}
	out := deref(schema{"$ref": ref})
	if s["nullable"] == true {
		out = withNullable(out)
	}
	return out
}

// isRecord: a schema with named properties (a task, a retry policy), as
// opposed to a map (labels, headers) or free-form JSON (a payload).
func isRecord(s schema) bool {
	_, ok := s["properties"].(map[string]any)
	return ok
}

// recordItems: a list's items are records, or one of several (a union's
// schedules), as pick tells for each item.
func recordItems(items schema) bool {
	_, oneOf := items["oneOf"]
	return isRecord(items) || oneOf
}

// prop is the schema of a record's property; nil when it has none.
func prop(s schema, name string) schema {
	props, _ := s["properties"].(map[string]any)
	p, _ := props[name].(schema)
	return p
}

// propNames are a record's properties, sorted.
func propNames(s schema) []string {
	props, _ := s["properties"].(map[string]any)
	names := make([]string, 0, len(props))
	for k := range props {
		names = append(names, k)
	}
	slices.Sort(names)
	return names
}

// freeForm: any JSON (a payload).
func freeForm(s schema) bool {
	_, any := s["anyOf"]
	return s == nil || any
}

var patterns sync.Map // string → *regexp.Regexp (nil when Go cannot compile it)

func pattern(p string) *regexp.Regexp {
	if re, ok := patterns.Load(p); ok {
		r, _ := re.(*regexp.Regexp)
		return r
	}
	re, err := regexp.Compile(p)
	if err != nil {
		re = nil
	}
	patterns.Store(p, re)
	return re
}

// check validates v against s and returns the first problem, with the
// path of the field it is in. It never quotes a value: a secret's
// problem must not print the secret.
func check(v any, s schema, path string) *FieldError {
	s = deref(s)
	if s == nil || freeForm(s) {
		return nil
	}
	if v == nil {
		if s["nullable"] == true {
			return nil
		}
		return &FieldError{Field: path, Message: "must not be null"}
	}
	if _, ok := s["oneOf"]; ok {
		m, isMap := v.(map[string]any)
		if !isMap {
			return &FieldError{Field: path, Message: "must be an object"}
		}
		member := pick(s, m)
		if member == nil {
			return &FieldError{Field: join(path, "type"), Message: "must be one of " + strings.Join(discriminatorValues(s), ", ")}
		}
		return check(v, member, path)
	}
	typ, _ := s["type"].(string)
	switch typ {
	case "object":
		m, ok := v.(map[string]any)
		if !ok {
			return &FieldError{Field: path, Message: "must be an object"}
		}
		return checkObject(m, s, path)
	case "array":
		a, ok := v.([]any)
		if !ok {
			return &FieldError{Field: path, Message: "must be a list"}
		}
		if n, ok := s["maxItems"].(float64); ok && float64(len(a)) > n {
			return &FieldError{Field: path, Message: fmt.Sprintf("must have at most %d items", int(n))}
		}
		if n, ok := s["minItems"].(float64); ok && float64(len(a)) < n {
			return &FieldError{Field: path, Message: fmt.Sprintf("must have at least %d items", int(n))}
		}
		items, _ := s["items"].(schema)
		for i, e := range a {
			if fe := check(e, items, fmt.Sprintf("%s[%d]", path, i)); fe != nil {
				return fe
			}
		}
	case "string":
		str, ok := v.(string)
		if !ok {
			return &FieldError{Field: path, Message: "must be a string"}
		}
		return checkString(str, s, path)
	case "integer", "number":
		f, ok := number(v)
		if !ok || (typ == "integer" && f != math.Trunc(f)) {
			return &FieldError{Field: path, Message: "must be " + map[string]string{"integer": "an integer", "number": "a number"}[typ]}
		}
		if lo, ok := s["minimum"].(float64); ok && f < lo {
			return &FieldError{Field: path, Message: fmt.Sprintf("must be at least %v", lo)}
		}
		if hi, ok := s["maximum"].(float64); ok && f > hi {
			return &FieldError{Field: path, Message: fmt.Sprintf("must be at most %v", hi)}
		}
	case "boolean":
		if _, ok := v.(bool); !ok {
			return &FieldError{Field: path, Message: "must be true or false"}
		}
	}
	return nil
}

func checkObject(m map[string]any, s schema, path string) *FieldError {
	if !isRecord(s) {
		if n, ok := s["maxProperties"].(float64); ok && float64(len(m)) > n {
			return &FieldError{Field: path, Message: fmt.Sprintf("must have at most %d entries", int(n))}
		}
		vals, _ := s["additionalProperties"].(schema)
		for _, k := range sortedKeys(m) {
			if fe := check(m[k], vals, join(path, k)); fe != nil {
				return fe
			}
		}
		return nil
	}
	for _, k := range sortedKeys(m) {
		p := prop(s, k)
		if p == nil {
			return &FieldError{Field: join(path, k), Message: "is not a field of " + strings.Join(propNames(s), ", ")}
		}
		if fe := check(m[k], p, join(path, k)); fe != nil {
			return fe
		}
	}
	req, _ := s["required"].([]any)
	for _, r := range req {
		k, _ := r.(string)
		if _, ok := m[k]; !ok {
			return &FieldError{Field: join(path, k), Message: "is required"}
		}
	}
	return nil
}

func checkString(str string, s schema, path string) *FieldError {
	n := utf8.RuneCountInString(str)
	if lo, ok := s["minLength"].(float64); ok && float64(n) < lo {
		return &FieldError{Field: path, Message: fmt.Sprintf("must be at least %d characters", int(lo))}
	}
	if hi, ok := s["maxLength"].(float64); ok && float64(n) > hi {
		return &FieldError{Field: path, Message: fmt.Sprintf("must be at most %d characters", int(hi))}
	}
	if enum, ok := s["enum"].([]any); ok && !slices.Contains(enum, any(str)) {
		var names []string
		for _, e := range enum {
			if es, ok := e.(string); ok && es == strings.ToLower(es) {
				names = append(names, es)
			}
		}
		return &FieldError{Field: path, Message: "must be one of " + strings.Join(names, ", ")}
	}
	if p, ok := s["pattern"].(string); ok {
		if re := pattern(p); re != nil && !re.MatchString(str) {
			return &FieldError{Field: path, Message: "does not match " + p}
		}
	}
	if s["format"] == "date-time" {
		if _, err := time.Parse(time.RFC3339, str); err != nil {
			return &FieldError{Field: path, Message: "must be an RFC 3339 time (2027-01-01T00:00:00Z)"}
		}
	}
	return nil
}

func discriminatorValues(s schema) []string {
	disc, _ := s["discriminator"].(map[string]any)
	mapping, _ := disc["mapping"].(map[string]any)
	return sortedKeys(mapping)
}

func join(path, k string) string {
	if path == "" {
		return k
	}
	return path + "." + k
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func number(v any) (float64, bool) {
	switch n := v.(type) {
	case int64:
		return float64(n), true
	case float64:
		return n, true
	}
	return 0, false
}
