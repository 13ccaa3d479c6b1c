package api

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"

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
	return body, nil
}

// decodeStrict decodes one JSON value from body into dst. Unknown fields are
// validation errors (so a typo is not silently ignored), read-only fields
// say so, and anything after the value is rejected.
func decodeStrict(body []byte, dst any, readOnly ...string) error {
	if len(bytes.TrimSpace(body)) == 0 {
		return badRequest("the request body is empty; send a JSON object")
	}
	if err := checkReadOnly(body, readOnly); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(dst); err != nil {
		return jsonError(err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return badRequest("unexpected data after the JSON value")
	}
	return nil
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

func encodeCursor(id string) string {
	if id == "" {
		return ""
	}
	return base64.RawURLEncoding.EncodeToString([]byte(id))
}
