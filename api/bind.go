package api

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"mime"
	"net/http"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/labstack/echo/v4"

	"github.com/axhq/ax/service"
)

// readBody returns the raw JSON body, enforcing the JSON content type (415)
// and the body limit (413, through the limitedBody installed by bodyLimit).
func readBody(c echo.Context) ([]byte, error) {
	req := c.Request()
	mt, _, err := mime.ParseMediaType(req.Header.Get(echo.HeaderContentType))
	if err != nil || (mt != echo.MIMEApplicationJSON && !strings.HasSuffix(mt, "+json")) {
		return nil, echo.NewHTTPError(http.StatusUnsupportedMediaType)
	}
	body, err := io.ReadAll(req.Body)
	if err != nil {
		var he *echo.HTTPError
		if errors.As(err, &he) {
			return nil, he
		}
		return nil, badRequest("the request body could not be read")
	}
	if !utf8.Valid(body) {
		// RFC 8259 §8.1: JSON text exchanged between systems is UTF-8. A
		// payload stored with invalid bytes would make every later list of
		// the tenant's tasks invalid JSON for a strict client.
		return nil, badRequest("the request body is not valid UTF-8 (RFC 8259 requires JSON to be UTF-8)")
	}
	return body, nil
}

// decodeStrict decodes one JSON value from body into dst. Unknown fields are
// validation errors (so a typo is not silently ignored), read-only fields
// say so, and anything after the value is rejected.
func decodeStrict(body []byte, dst any, readOnly ...string) error {
	trimmed := bytes.TrimSpace(body)
	if len(trimmed) == 0 {
		return badRequest("the request body is empty; send a JSON object")
	}
	if bytes.Equal(trimmed, []byte("null")) {
		return badRequest("the request body must be a JSON object, not null")
	}
	if err := checkReadOnly(body, readOnly); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(dst); err != nil {
		if ve := unknownFieldError(err, body, dst); ve != nil {
			return ve
		}
		return jsonError(err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return badRequest("unexpected data after the JSON value")
	}
	if err := checkNulls(body, reflect.TypeOf(dst)); err != nil {
		return err
	}
	if path, ok := findNUL(reflect.ValueOf(dst), ""); ok {
		// Postgres text cannot hold U+0000: an invalid value, like a
		// control character. Raw JSON (payloads, outputs) is the
		// service's business: a task's payload, stored as bytes, keeps it.
		return &service.ValidationError{Fields: []service.FieldError{{
			Field:   path,
			Message: "must not contain the NUL character (U+0000, \\u0000)",
		}}}
	}
	return nil
}

// unknownFieldError turns encoding/json's "unknown field" error, which
// names the key only, into a field error with the key's path
// (schedule.delay_seconds), found by walking body along dst's type.
func unknownFieldError(err error, body []byte, dst any) error {
	name, ok := strings.CutPrefix(err.Error(), "json: unknown field ")
	if !ok {
		return nil
	}
	name = strings.Trim(name, `"`)
	var doc any
	if err := json.Unmarshal(body, &doc); err != nil {
		return nil //nolint:nilerr // not a path lookup's business: jsonError reports the decode error
	}
	path := unknownPath(doc, reflect.TypeOf(dst), "", name)
	if path == "" {
		path = name
	}
	return &service.ValidationError{Fields: []service.FieldError{{Field: path, Message: "unknown field"}}}
}

// unknownPath returns the dotted path of the first key of doc named name
// that type t does not have ("" when there is none).
func unknownPath(doc any, t reflect.Type, prefix, name string) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	join := func(k string) string {
		if prefix == "" {
			return k
		}
		return prefix + "." + k
	}
	switch d := doc.(type) {
	case map[string]any:
		switch t.Kind() {
		case reflect.Struct:
			keys := slices.Sorted(maps.Keys(d))
			for _, k := range keys {
				f, ok := jsonField(t, k)
				if !ok {
					if k == name {
						return join(k)
					}
					continue
				}
				if p := unknownPath(d[k], f.Type, join(k), name); p != "" {
					return p
				}
			}
		case reflect.Map:
			for _, k := range slices.Sorted(maps.Keys(d)) {
				if p := unknownPath(d[k], t.Elem(), join(k), name); p != "" {
					return p
				}
			}
		}
	case []any:
		if t.Kind() == reflect.Slice || t.Kind() == reflect.Array {
			for i, v := range d {
				if p := unknownPath(v, t.Elem(), prefix+"["+strconv.Itoa(i)+"]", name); p != "" {
					return p
				}
			}
		}
	}
	return ""
}

// jsonField finds the field of struct type t that encoding/json decodes key
// into (matching its name case-insensitively, as encoding/json does).
func jsonField(t reflect.Type, key string) (reflect.StructField, bool) {
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		tag, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if tag == "-" {
			continue
		}
		if tag == "" {
			tag = f.Name
		}
		if strings.EqualFold(tag, key) {
			return f, true
		}
	}
	return reflect.StructField{}, false
}

var rawMessageType = reflect.TypeFor[json.RawMessage]()

// nullableExtension is the swag tag that makes a field nullable in the
// document (`extensions:"x-nullable"`): null is a value there (none, the
// default), and only there.
const nullableExtension = "x-nullable"

// checkNulls refuses a JSON null given to a field the document does not
// call nullable, naming its path, in any body decodeStrict reads. encoding/
// json leaves such a field as it was, so a null was read as "absent": a
// PATCH {"endpoint_id": null} answered 200 and changed nothing. Nullable
// are the fields tagged x-nullable and raw JSON (a payload, an output), of
// which null is one value.
func checkNulls(body []byte, t reflect.Type) error {
	if !bytes.Contains(body, []byte("null")) {
		return nil // the common case: nothing to look at
	}
	var doc any
	if err := json.Unmarshal(body, &doc); err != nil {
		return nil //nolint:nilerr // the strict decode reported it already
	}
	var ve service.ValidationError
	walkNulls(doc, t, "", &ve)
	return ve.Err()
}

// walkNulls records in ve every null in doc where type t (a struct's
// field, a map's value or a slice's element) takes none.
func walkNulls(doc any, t reflect.Type, path string, ve *service.ValidationError) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	join := func(k string) string {
		if path == "" {
			return k
		}
		return path + "." + k
	}
	const refused = "must not be null; leave the field out instead"
	switch d := doc.(type) {
	case map[string]any:
		switch t.Kind() {
		case reflect.Struct:
			for _, k := range slices.Sorted(maps.Keys(d)) {
				f, ok := jsonField(t, k)
				switch {
				case !ok || f.Type == rawMessageType: // unknown (refused as such) or any JSON
				case d[k] == nil && !strings.Contains(f.Tag.Get("extensions"), nullableExtension):
					ve.Add(join(k), refused)
				default:
					walkNulls(d[k], f.Type, join(k), ve)
				}
			}
		case reflect.Map:
			for _, k := range slices.Sorted(maps.Keys(d)) {
				if d[k] == nil && t.Elem() != rawMessageType {
					ve.Add(join(k), refused)
					continue
				}
				walkNulls(d[k], t.Elem(), join(k), ve)
			}
		}
	case []any:
		if t.Kind() != reflect.Slice && t.Kind() != reflect.Array {
			return
		}
		for i, v := range d {
			p := path + "[" + strconv.Itoa(i) + "]"
			if v == nil && t.Elem() != rawMessageType {
				ve.Add(p, "must not be null")
				continue
			}
			walkNulls(v, t.Elem(), p, ve)
		}
	}
}

// findNUL returns the JSON path of the first string in v (struct fields,
// map keys and values, slice elements) that contains U+0000.
func findNUL(v reflect.Value, path string) (string, bool) {
	join := func(k string) string {
		if path == "" {
			return k
		}
		return path + "." + k
	}
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if v.IsNil() {
			return "", false
		}
		return findNUL(v.Elem(), path)
	case reflect.String:
		return path, strings.IndexByte(v.String(), 0) >= 0
	case reflect.Struct:
		for i := range v.NumField() {
			f := v.Type().Field(i)
			if !f.IsExported() {
				continue
			}
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if name == "" {
				name = f.Name
			}
			if p, ok := findNUL(v.Field(i), join(name)); ok {
				return p, true
			}
		}
	case reflect.Map:
		iter := v.MapRange()
		for iter.Next() {
			k := iter.Key()
			if k.Kind() == reflect.String && strings.IndexByte(k.String(), 0) >= 0 {
				return join(k.String()), true
			}
			if p, ok := findNUL(iter.Value(), join(fmt.Sprint(k.Interface()))); ok {
				return p, true
			}
		}
	case reflect.Slice, reflect.Array:
		if v.Type() == rawMessageType || v.Type().Elem().Kind() == reflect.Uint8 {
			return "", false
		}
		for i := range v.Len() {
			if p, ok := findNUL(v.Index(i), path+"["+strconv.Itoa(i)+"]"); ok {
				return p, true
			}
		}
	}
	return "", false
}

// decodeOptional decodes a JSON body into dst when the request has one; an
// empty body leaves dst as it is.
func decodeOptional(c echo.Context, dst any) error {
	if c.Request().ContentLength == 0 {
		return nil
	}
	body, err := readBody(c)
	if err != nil || len(body) == 0 {
		return err
	}
	return decodeStrict(body, dst)
}

// checkReadOnly rejects top-level fields the server owns.
func checkReadOnly(body []byte, readOnly []string) error {
	if len(readOnly) == 0 {
		return nil
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(body, &top); err != nil {
		return nil //nolint:nilerr // the strict decode that follows reports the syntax error
	}
	var ve service.ValidationError
	for _, f := range readOnly {
		if _, ok := top[f]; ok {
			ve.Add(f, "is read-only and set by the server")
		}
	}
	return ve.Err()
}

func jsonError(err error) error {
	var (
		syn *json.SyntaxError
		typ *json.UnmarshalTypeError
	)
	switch {
	case errors.As(err, &syn):
		return badRequest("malformed JSON at byte " + strconv.FormatInt(syn.Offset, 10))
	case errors.As(err, &typ):
		field := typ.Field
		if field == "" {
			return badRequest("the request body must be a JSON object")
		}
		return &service.ValidationError{Fields: []service.FieldError{{Field: field, Message: "must be " + jsonKind(typ.Type.Kind().String())}}}
	case errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF):
		return badRequest("the JSON body ends too early")
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		name := strings.Trim(strings.TrimPrefix(err.Error(), "json: unknown field "), `"`)
		return &service.ValidationError{Fields: []service.FieldError{{Field: name, Message: "unknown field"}}}
	}
	var he *echo.HTTPError
	if errors.As(err, &he) {
		return he
	}
	return badRequest("the request body is not valid JSON")
}

func jsonKind(k string) string {
	switch k {
	case "int", "int8", "int16", "int32", "int64", "uint", "uint8", "uint16", "uint32", "uint64", "float32", "float64":
		return "a number"
	case "bool":
		return "true or false"
	case "map", "struct":
		return "an object"
	case "slice", "array":
		return "an array"
	}
	if strings.ContainsRune("aeiou", rune(k[0])) {
		return "an " + k
	}
	return "a " + k
}

func badRequest(detail string) error {
	return &problem{Status: http.StatusBadRequest, Title: "Bad Request", Detail: detail}
}

// pageParams reads limit and cursor. The cursor is opaque to clients: the
// base64 of the last id of the previous page.
func pageParams(c echo.Context) (service.Page, error) {
	var ve service.ValidationError
	limit := 0
	if err := presentButEmpty(c, "limit"); err != nil {
		return service.Page{}, err
	}
	if v := c.QueryParam("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			ve.Add("limit", "must be a positive integer (at most 500; larger values are clamped)")
		}
		limit = n
	}
	page := service.Page{Limit: service.ClampLimit(limit)}
	if v := c.QueryParam("cursor"); v != "" {
		raw, err := base64.RawURLEncoding.DecodeString(v)
		if err != nil || len(raw) != 36 {
			ve.Add("cursor", "is not a cursor returned by this API")
		} else {
			page.After = string(raw)
		}
	}
	return page, ve.Err()
}

// presentButEmpty refuses, with 400, a query parameter given without a
// value (?limit=): a client that sends one means something, and treating
// it as absent hides the bug.
func presentButEmpty(c echo.Context, names ...string) error {
	q := c.QueryParams()
	for _, n := range names {
		if vs, ok := q[n]; ok && slices.Contains(vs, "") {
			return badRequest("query parameter " + n + " is empty; give it a value or leave it out")
		}
	}
	return nil
}

func encodeCursor(id string) string {
	if id == "" {
		return ""
	}
	return base64.RawURLEncoding.EncodeToString([]byte(id))
}
