package api

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"sync"

	"github.com/labstack/echo/v4"

	"github.com/axhq/ax/openapi"
)

// specQueryParams maps "METHOD /path/{id}" to the query parameters the
// OpenAPI document declares for that operation. The document is generated
// from the handlers' annotations, so the annotation is the one place a
// query parameter is declared: a handler that reads a parameter its
// annotation does not list fails its tests with a 400.
var specQueryParams = sync.OnceValue(func() map[string][]string {
	var doc struct {
		Paths map[string]map[string]struct {
			Parameters []struct {
				In   string `json:"in"`
				Name string `json:"name"`
			} `json:"parameters"`
		} `json:"paths"`
	}
	out := map[string][]string{}
	if err := json.Unmarshal(openapi.Spec(), &doc); err != nil {
		return out // no document: checkQuery lets everything through
	}
	for path, ops := range doc.Paths {
		for method, op := range ops {
			names := []string{}
			for _, p := range op.Parameters {
				if p.In == "query" {
					names = append(names, p.Name)
				}
			}
			out[strings.ToUpper(method)+" "+path] = names
		}
	}
	return out
})

// echoPathToSpec turns /v1/tasks/:id into /v1/tasks/{id}.
func echoPathToSpec(path string) string {
	parts := strings.Split(path, "/")
	for i, p := range parts {
		if strings.HasPrefix(p, ":") {
			parts[i] = "{" + p[1:] + "}"
		}
	}
	return strings.Join(parts, "/")
}

// checkQuery refuses, with 400, a query parameter the operation does not
// declare (a misspelt filter must not silently return everything) and a NUL
// byte in any query parameter or path segment (Postgres text cannot hold
// one). An operation missing from the document is not checked for names.
func checkQuery(method, path string) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			q := c.QueryParams()
			for name, vs := range q {
				if strings.ContainsRune(name, 0) || slices.ContainsFunc(vs, hasNUL) {
					return badRequest("query parameter " + quoteParam(name) + " contains a NUL character")
				}
			}
			if slices.ContainsFunc(c.ParamValues(), hasNUL) {
				return badRequest("the path contains a NUL character")
			}
			known, ok := specQueryParams()[method+" "+echoPathToSpec(path)]
			if !ok {
				return next(c)
			}
			var unknown []string
			for name := range q {
				if !slices.Contains(known, name) {
					unknown = append(unknown, quoteParam(name))
				}
			}
			if len(unknown) > 0 {
				slices.Sort(unknown)
				msg := "unknown query parameter " + strings.Join(unknown, ", ")
				if len(unknown) > 1 {
					msg = "unknown query parameters " + strings.Join(unknown, ", ")
				}
				if len(known) == 0 {
					msg += "; this operation takes none"
				} else {
					msg += "; this operation takes " + strings.Join(known, ", ")
				}
				return &problem{Status: http.StatusBadRequest, Title: "Bad Request", Detail: msg}
			}
			return next(c)
		}
	}
}

func hasNUL(s string) bool { return strings.IndexByte(s, 0) >= 0 }

func quoteParam(s string) string {
	b, _ := json.Marshal(strings.ToValidUTF8(strings.ReplaceAll(s, "\x00", `\0`), "\uFFFD"))
	return string(b)
}
