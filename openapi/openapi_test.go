package openapi_test

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/labstack/echo/v4"
	"github.com/stretchr/testify/require"

	"github.com/axhq/ax/api"
	"github.com/axhq/ax/openapi"
)

const (
	// oapiCodegen generates the client that must compile.
	oapiCodegen = "github.com/oapi-codegen/oapi-codegen/v2/cmd/oapi-codegen@v2.8.2"
	// oapiRuntime is the runtime library that client needs.
	oapiRuntime = "github.com/oapi-codegen/runtime@v1.9.0"

	problemRef         = "#/components/schemas/Problem"
	problemContentType = "application/problem+json"
)

func load(t *testing.T) *openapi3.T {
	t.Helper()
	doc, err := openapi3.NewLoader().LoadFromData(openapi.Spec())
	require.NoError(t, err)
	return doc
}

func TestSpecIsValid(t *testing.T) {
	t.Parallel()
	doc := load(t)
	require.NoError(t, doc.Validate(t.Context()))
	require.Equal(t, "ax API", doc.Info.Title)

	bearer := doc.Components.SecuritySchemes["BearerAuth"]
	require.NotNil(t, bearer, "the BearerAuth security scheme is missing")
	require.Equal(t, "http", bearer.Value.Type)
	require.Equal(t, "bearer", bearer.Value.Scheme)
	require.Equal(t, "JWT", bearer.Value.BearerFormat)

	require.Contains(t, doc.Components.Schemas, "Problem")
	require.Contains(t, doc.Components.Schemas, "FieldError")

	// Schema names become type names in generated clients: every DTO needs
	// a `// @name Name` after its struct, or swag names it api.fooResponse
	// (and a generic one Page-api_fooResponse).
	name := regexp.MustCompile(`^[A-Z][A-Za-z0-9]*$`)
	for n := range doc.Components.Schemas {
		require.Regexp(t, name, n, "schema %q: end its struct with `} // @name PascalCase`; no generic DTOs", n)
	}
}

// TestSchemaNamesAreUnique guards against two DTOs with the same
// `// @name`: swag silently keeps only one of them.
func TestSchemaNamesAreUnique(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob(filepath.Join("..", "api", "*.go"))
	require.NoError(t, err)
	require.NotEmpty(t, files)
	atName := regexp.MustCompile(`(?m)^}\s*//\s*@name\s+(\S+)`)
	seen := map[string]string{}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		require.NoError(t, err)
		for _, m := range atName.FindAllSubmatch(src, -1) {
			name := string(m[1])
			if prev, dup := seen[name]; dup {
				t.Errorf("@name %s is used in both %s and %s", name, prev, f)
			}
			seen[name] = f
		}
	}
}

func newServer(t *testing.T) *echo.Echo {
	t.Helper()
	auth, err := api.NewAuthenticator(api.AuthConfig{HMACSecret: []byte("test secret; no /v1 request is served")})
	require.NoError(t, err)
	return api.New(api.Config{
		Logger: slog.New(slog.DiscardHandler),
		Auth:   auth,
		Ready:  func(context.Context) error { return nil },
	})
}

// TestEveryRouteIsDocumented checks that the routes echo serves and the
// operations the spec describes are the same set.
func TestEveryRouteIsDocumented(t *testing.T) {
	t.Parallel()
	doc := load(t)
	documented := map[string]bool{}
	for path, item := range doc.Paths.Map() {
		for method := range item.Operations() {
			documented[method+" "+path] = true
		}
	}
	param := regexp.MustCompile(`:([^/]+)`)
	served := map[string]bool{}
	for _, r := range newServer(t).Routes() {
		// /metrics is Prometheus text, not part of the REST API.
		if r.Method == echo.RouteNotFound || r.Path == "/openapi.json" || r.Path == "/metrics" {
			continue
		}
		require.NotContains(t, r.Path, "*", "route %s %s: a wildcard route cannot be described", r.Method, r.Path)
		served[r.Method+" "+param.ReplaceAllString(r.Path, "{$1}")] = true
	}
	for _, route := range slices.Sorted(maps.Keys(served)) {
		if !documented[route] {
			t.Errorf("%s is served but not in the spec: annotate its handler (@Router) and run `make generate`", route)
		}
	}
	for _, op := range slices.Sorted(maps.Keys(documented)) {
		if !served[op] {
			t.Errorf("%s is in the spec but not served: fix its @Router or api/routes.go and run `make generate`", op)
		}
	}
}

func TestServeSpec(t *testing.T) {
	t.Parallel()
	e := newServer(t)

	rec := httptest.NewRecorder()
	e.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/openapi.json", nil))
	require.Equal(t, http.StatusOK, rec.Code)
	require.Equal(t, "application/json", rec.Header().Get("Content-Type"))
	require.NotEmpty(t, rec.Header().Get("Cache-Control"))
	require.Equal(t, openapi.Spec(), rec.Body.Bytes())
	etag := rec.Header().Get("ETag")
	require.NotEmpty(t, etag)

	req := httptest.NewRequest(http.MethodGet, "/openapi.json", nil)
	req.Header.Set("If-None-Match", etag)
	rec = httptest.NewRecorder()
	e.ServeHTTP(rec, req)
	require.Equal(t, http.StatusNotModified, rec.Code)
	require.Empty(t, rec.Body.Bytes())
}

// TestOperations checks what every operation must declare: /v1 ones need
// the bearer token and may answer 401; every error is a Problem.
func TestOperations(t *testing.T) {
	t.Parallel()
	doc := load(t)
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			where := method + " " + path
			var success bool
			for code, r := range op.Responses.Map() {
				if code == "default" || code[0] == '4' || code[0] == '5' {
					require.Len(t, r.Value.Content, 1, "%s: response %s: one body, a Problem", where, code)
					media := r.Value.Content.Get(problemContentType)
					require.NotNil(t, media, "%s: response %s is not %s", where, code, problemContentType)
					require.Equal(t, problemRef, media.Schema.Ref,
						"%s: response %s: write `@Failure %s {object} problem`", where, code, code)
				} else if code[0] == '2' {
					success = true
				}
			}
			require.True(t, success, "%s: no @Success response", where)

			if !strings.HasPrefix(path, "/v1/") {
				continue
			}
			require.NotNil(t, op.Security, "%s: add `@Security BearerAuth`", where)
			require.True(t, slices.ContainsFunc(*op.Security, func(req openapi3.SecurityRequirement) bool {
				_, ok := req["BearerAuth"]
				return ok
			}), "%s: add `@Security BearerAuth`", where)
			require.NotNil(t, op.Responses.Status(http.StatusUnauthorized), "%s: add `@Failure 401 {object} problem`", where)
		}
	}
}

// TestGeneratedClientCompiles generates a Go client with oapi-codegen in a
// throwaway module and builds it. It needs the Go module proxy.
func TestGeneratedClientCompiles(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name, content string) {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600))
	}
	write("openapi.json", string(openapi.Spec()))
	write("go.mod", "module example.com/axclient\n\ngo 1.24\n")
	write("oapi-codegen.yaml", "package: axclient\noutput: client.gen.go\ngenerate:\n  models: true\n  client: true\n")

	env := append(os.Environ(), "GOFLAGS=-mod=mod -buildvcs=false", "GOWORK=off")
	run := func(args ...string) {
		cmd := exec.CommandContext(t.Context(), "go", args...)
		cmd.Dir, cmd.Env = dir, env
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "go %s:\n%s", strings.Join(args, " "), out)
	}
	run("run", oapiCodegen, "-config", "oapi-codegen.yaml", "openapi.json")
	run("get", oapiRuntime)
	run("build", "./...")
	run("vet", "./...")
}

// TestSpecTellsTheTruth pins what generated clients rely on and the server
// does: next_run_at is null for paused and completed tasks, create and
// rotate-secret always return the secret, timeout_ms and priority accept
// null, and every authenticated operation may answer 400 (an unknown query
// parameter).
func TestSpecTellsTheTruth(t *testing.T) {
	doc := load(t)
	schema := func(name string) *openapi3.Schema {
		ref := doc.Components.Schemas[name]
		require.NotNil(t, ref, name)
		return ref.Value
	}
	require.True(t, schema("Task").Properties["next_run_at"].Value.Nullable, "Task.next_run_at")
	require.Contains(t, schema("Task").Required, "next_run_at", "present, null when it will not fire")
	for _, f := range []string{"timeout_ms", "priority"} {
		p := schema("TaskRequest").Properties[f].Value
		require.True(t, p.Nullable, "TaskRequest.%s", f)
		require.NotNil(t, p.Min, f)
		require.NotNil(t, p.Max, f)
	}
	require.Contains(t, schema("EndpointWithSecret").Required, "secret")
	require.NotContains(t, schema("Endpoint").Properties, "secret", "only create and rotate-secret show it")
	for path, op := range map[string]*openapi3.Operation{
		"POST /v1/endpoints":                    doc.Paths.Find("/v1/endpoints").Post,
		"POST /v1/endpoints/{id}/rotate-secret": doc.Paths.Find("/v1/endpoints/{id}/rotate-secret").Post,
	} {
		var got string
		for code, r := range op.Responses.Map() {
			if strings.HasPrefix(code, "2") {
				got = r.Value.Content["application/json"].Schema.Ref
			}
		}
		require.Equal(t, "#/components/schemas/EndpointWithSecret", got, path)
	}
	cancel := doc.Paths.Find("/v1/executions/{id}/cancel").Post
	require.NotNil(t, cancel.Responses.Value("202"), "cancel of a running execution")
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			if op.Security != nil && len(*op.Security) > 0 {
				require.NotNil(t, op.Responses.Value("400"), "%s %s", method, path)
			}
		}
	}
	// A schedule is one of five shapes keyed by type, each requiring its
	// own field and closed to the others' (api's TestSpecScheduleShapes
	// holds the server to it).
	sched := schema("Schedule")
	require.NotNil(t, sched.Discriminator, "Schedule: a oneOf with a discriminator")
	require.Equal(t, "type", sched.Discriminator.PropertyName)
	require.Len(t, sched.OneOf, 5)
	for typ, field := range map[string]string{
		"cron": "cron", "interval": "interval_seconds", "once": "run_at", "union": "schedules", "event": "event",
	} {
		m, ok := sched.Discriminator.Mapping[typ]
		require.True(t, ok, "Schedule: no variant for %s", typ)
		v := doc.Components.Schemas[strings.TrimPrefix(m.Ref, "#/components/schemas/")].Value
		require.ElementsMatch(t, []string{"type", field}, v.Required, typ)
		require.False(t, *v.AdditionalProperties.Has, "%s: closed", typ)
		require.Equal(t, []any{typ}, v.Properties["type"].Value.Enum)
	}
	var names []string
	for _, p := range doc.Paths.Find("/v1/tasks").Get.Parameters {
		names = append(names, p.Value.Name)
	}
	require.Contains(t, names, "name")
}

// TestNullableHasAType holds, without Node.js, the rule Redocly's
// nullable-type-sibling checks in make verify: OpenAPI 3.0.3 reads
// `nullable` only beside a `type`, so a nullable schema without one says
// nothing (openapi/internal/convert: anyJSON, typedNullables).
func TestNullableHasAType(t *testing.T) {
	t.Parallel()
	doc := load(t)
	var walk func(where string, s *openapi3.SchemaRef, depth int)
	walk = func(where string, s *openapi3.SchemaRef, depth int) {
		if s == nil || s.Value == nil || s.Ref != "" && depth > 0 || depth > 12 {
			return
		}
		v := s.Value
		if v.Nullable && v.Type == nil {
			t.Errorf("%s: nullable without a type", where)
		}
		for name, p := range v.Properties {
			walk(where+"."+name, p, depth+1)
		}
		for i, sub := range slices.Concat(v.AllOf, v.AnyOf, v.OneOf) {
			walk(fmt.Sprintf("%s/%d", where, i), sub, depth+1)
		}
		walk(where+"[]", v.Items, depth+1)
		walk(where+"{}", v.AdditionalProperties.Schema, depth+1)
	}
	for name, s := range doc.Components.Schemas {
		walk(name, s, 0)
	}
	require.NotNil(t, doc.Info.License, "info.license (Redocly's info-license)")
}
