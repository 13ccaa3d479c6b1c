// Command convert turns the Swagger 2.0 document swag writes into the
// OpenAPI 3 document ax serves, and finishes what Swagger 2.0 cannot say:
//
//   - The bearer scheme (an apiKey in the Authorization header, the only way
//     Swagger 2.0 can spell it) becomes http/bearer with bearerFormat JWT.
//   - An operation without @Security gets `security: []`: it is public.
//   - An authenticated operation that declares no 400 gets one: the API
//     refuses unknown query parameters on every route.
//   - Every 4xx/5xx response is application/problem+json, whatever the
//     operation's @Produce says, and a 401 declares WWW-Authenticate.
//   - Required properties. encoding/json always writes a field without
//     omitempty, so in a schema that only responses use such a field is
//     required; those schemas come from a second swag run with
//     --requiredByDefault (-required). A request schema cannot be read that
//     way (PATCH bodies reuse create DTOs), so it keeps only the fields
//     marked `validate:"required"`, as swag wrote them in -in.
//   - Schedule, one Go struct for three types of schedule, becomes a oneOf
//     of CronSchedule, IntervalSchedule and OnceSchedule with a
//     discriminator on type (scheduleVariants).
//   - The bounds swag has no tag for: array sizes (its maxLength tag on an
//     array field bounds the items), map sizes and map value lengths
//     (collectionBounds), exclusiveMinimum (exclusiveMins). Numeric and
//     string bounds come from the Go tags (minimum, maximum, minLength,
//     maxLength) through swag.
//
// It fails on a schema swag left empty (a field type it could not resolve),
// validates the result, and writes it with sorted keys and two-space
// indentation, so that regenerating an unchanged API yields the same bytes.
// `go generate` in package openapi runs it.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"

	"github.com/getkin/kin-openapi/openapi2"
	"github.com/getkin/kin-openapi/openapi2conv"
	"github.com/getkin/kin-openapi/openapi3"
)

const (
	problemContentType = "application/problem+json"
	schemaRefPrefix    = "#/components/schemas/"
)

func main() {
	in := flag.String("in", "swagger.json", "the Swagger 2.0 document swag wrote")
	required := flag.String("required", "", "the same document written with swag --requiredByDefault (optional)")
	out := flag.String("out", "openapi.json", "the OpenAPI 3 document to write")
	flag.Parse()
	if err := run(*in, *required, *out); err != nil {
		fmt.Fprintln(os.Stderr, "convert:", err)
		os.Exit(1)
	}
}

func run(in, required, out string) error {
	doc, err := load(in)
	if err != nil {
		return err
	}
	if required != "" {
		withDefaults, err := load(required)
		if err != nil {
			return err
		}
		if err := takeResponseSchemas(doc, withDefaults); err != nil {
			return fmt.Errorf("%s and %s: %w", in, required, err)
		}
	}
	if err := finish(doc); err != nil {
		return err
	}
	if err := doc.Validate(context.Background()); err != nil {
		return fmt.Errorf("the converted document is invalid: %w", err)
	}
	b, err := encode(doc)
	if err != nil {
		return err
	}
	return os.WriteFile(out, b, 0o644) //nolint:gosec // a generated file, committed and served
}

func load(path string) (*openapi3.T, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var doc2 openapi2.T
	if err := json.Unmarshal(raw, &doc2); err != nil {
		return nil, fmt.Errorf("parse %s: %w", path, err)
	}
	doc, err := openapi2conv.ToV3(&doc2)
	if err != nil {
		return nil, fmt.Errorf("convert %s: %w", path, err)
	}
	if doc.Components == nil {
		doc.Components = &openapi3.Components{}
	}
	return doc, nil
}

// takeResponseSchemas replaces the schemas of doc that no request body or
// parameter uses with their versions in withDefaults.
func takeResponseSchemas(doc, withDefaults *openapi3.T) error {
	names := slices.Sorted(maps.Keys(doc.Components.Schemas))
	if !slices.Equal(names, slices.Sorted(maps.Keys(withDefaults.Components.Schemas))) {
		return errors.New("the two swag runs produced different schemas; regenerate both")
	}
	inRequests := map[string]bool{}
	if doc.Paths != nil {
		for _, item := range doc.Paths.Map() {
			for _, op := range item.Operations() {
				var params openapi3.Parameters
				params = append(params, item.Parameters...)
				params = append(params, op.Parameters...)
				for _, p := range params {
					if p.Value != nil {
						mark(doc, p.Value.Schema, inRequests)
					}
				}
				if op.RequestBody != nil && op.RequestBody.Value != nil {
					for _, m := range op.RequestBody.Value.Content {
						mark(doc, m.Schema, inRequests)
					}
				}
			}
		}
	}
	for _, name := range names {
		if !inRequests[name] {
			doc.Components.Schemas[name] = withDefaults.Components.Schemas[name]
		}
	}
	return nil
}

// mark records the component schemas s refers to, transitively.
func mark(doc *openapi3.T, s *openapi3.SchemaRef, seen map[string]bool) {
	if s == nil {
		return
	}
	if name, ok := strings.CutPrefix(s.Ref, schemaRefPrefix); ok {
		if seen[name] {
			return
		}
		seen[name] = true
		mark(doc, doc.Components.Schemas[name], seen)
		return
	}
	v := s.Value
	if v == nil {
		return
	}
	for _, p := range v.Properties {
		mark(doc, p, seen)
	}
	for _, group := range []openapi3.SchemaRefs{v.AllOf, v.AnyOf, v.OneOf} {
		for _, sub := range group {
			mark(doc, sub, seen)
		}
	}
	mark(doc, v.Items, seen)
	mark(doc, v.Not, seen)
	mark(doc, v.AdditionalProperties.Schema, seen)
}

// finish rewrites the converted document where Swagger 2.0 falls short.
func finish(doc *openapi3.T) error {
	if c := doc.Info.Contact; c != nil && c.Name == "" && c.URL == "" && c.Email == "" && len(c.Extensions) == 0 {
		doc.Info.Contact = nil // swag always writes an empty one
	}
	for _, s := range doc.Components.SecuritySchemes {
		if s.Value != nil && s.Value.Type == "apiKey" && s.Value.In == "header" &&
			strings.EqualFold(s.Value.Name, "Authorization") {
			s.Value.Type, s.Value.Scheme, s.Value.BearerFormat = "http", "bearer", "JWT"
			s.Value.In, s.Value.Name = "", ""
		}
	}
	for _, name := range slices.Sorted(maps.Keys(doc.Components.Schemas)) {
		if v := doc.Components.Schemas[name].Value; v != nil && isEmptyObject(v) {
			return fmt.Errorf("schema %s is empty: swag could not resolve one of its fields "+
				"(json.RawMessage and other external types need a swaggertype tag); run swag without --quiet to see which", name)
		}
	}
	anyJSON(doc)
	if doc.Paths == nil {
		return nil
	}
	if err := typedNullables(doc); err != nil {
		return err
	}
	if err := collectionBounds(doc); err != nil {
		return err
	}
	if err := exclusiveMins(doc); err != nil {
		return err
	}
	if err := patterns(doc); err != nil {
		return err
	}
	keepGoStrings(doc)
	if err := scheduleVariants(doc); err != nil {
		return err
	}
	patchSchemas(doc)
	closeRequestSchemas(doc)
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			if op.RequestBody != nil && op.RequestBody.Value != nil {
				delete(op.RequestBody.Value.Extensions, "x-originalParamName")
			}
			emptyMeansAbsent(op)
			if op.Security == nil {
				// Say explicitly that the operation is public.
				op.Security = &openapi3.SecurityRequirements{}
			}
			if op.Responses == nil {
				continue
			}
			if len(*op.Security) > 0 {
				// Every authenticated route refuses unknown query
				// parameters (and NUL characters) with a 400, counts
				// against the tenant's API rate (429), and answers an
				// unexpected failure (a change it could not record, say)
				// with a 500 that changed nothing.
				addProblem(doc, op, "400", "Bad Request: an unknown query parameter, or a NUL character in the path or query. "+
					"(A control character other than a tab in a header is refused by the HTTP server itself, with a "+
					"text/plain 400, before the API sees the request.)")
				addProblem(doc, op, "429", "Too Many Requests: the tenant's api_requests_per_second limit is reached")
				rateLimitHeaders(op.Responses.Value("429").Value)
				addProblem(doc, op, "500", "Internal Server Error: an unexpected failure; nothing was changed")
			}
			if hasHeaderParam(op, "Idempotency-Key") {
				// The key is refused when malformed (422), reused with
				// another body or still in progress (409).
				addProblem(doc, op, "409", "Conflict: the Idempotency-Key was used with another body, or its first request is in progress")
				addProblem(doc, op, "422", "Unprocessable Entity: the body or the Idempotency-Key is invalid")
			}
			for code, r := range op.Responses.Map() {
				if r.Value == nil || !isError(code) {
					continue
				}
				if err := asProblem(r.Value, code); err != nil {
					return fmt.Errorf("%s %s: response %s: %w", method, path, code, err)
				}
			}
		}
	}
	return nil
}

// collectionBound is the size the API allows an array (items) or a map
// (properties) of a request schema.
type collectionBound struct{ min, max uint64 }

// collectionSizes are the sizes the API enforces on request arrays and
// maps. swag cannot write them: on an array field its maxLength tag bounds
// the items' length, not the array's, and it has no tag for maxProperties.
// Keep them in step with packages schedule (CalendarDatesMax,
// ExcludeCalendarsMax, UnionMembersMin, UnionMembersMax) and service (WorkflowNodesMax, LabelsMax,
// headersMax).
var collectionSizes = map[string]map[string]collectionBound{
	"CalendarRequest": {"dates": {0, 10_000}},
	"Schedule":        {"exclude_calendars": {0, 20}, "schedules": {2, 10}},
	"WorkflowRequest": {"nodes": {1, 200}},
	"TaskRequest":     {"labels": {0, 32}},
	"EndpointRequest": {"headers": {0, 32}},
}

// mapValueLengths are the longest values the API takes in request maps
// (labelValueMax and headerValueMax in package service); swag writes a
// map's value schema without its field's tags.
var mapValueLengths = map[string]map[string]uint64{
	"TaskRequest":     {"labels": 256},
	"EndpointRequest": {"headers": 1024},
}

// collectionBounds sets minItems/maxItems (arrays) or maxProperties (maps)
// from collectionSizes.
func collectionBounds(doc *openapi3.T) error {
	for _, schema := range slices.Sorted(maps.Keys(collectionSizes)) {
		ref := doc.Components.Schemas[schema]
		if ref == nil || ref.Value == nil {
			return fmt.Errorf("collectionBounds: no schema %s", schema)
		}
		for prop, b := range collectionSizes[schema] {
			p := ref.Value.Properties[prop]
			if p == nil || p.Value == nil || p.Ref != "" {
				return fmt.Errorf("collectionBounds: %s has no inline property %s", schema, prop)
			}
			switch {
			case p.Value.Type.Is("array"):
				p.Value.MinItems, p.Value.MaxItems = b.min, openapi3.Ptr(b.max)
			case p.Value.Type.Is("object"):
				p.Value.MinProps, p.Value.MaxProps = b.min, openapi3.Ptr(b.max)
				if n, ok := mapValueLengths[schema][prop]; ok {
					vs := p.Value.AdditionalProperties.Schema
					if vs == nil || vs.Value == nil || !vs.Value.Type.Is("string") {
						return fmt.Errorf("collectionBounds: %s.%s is not a map of strings", schema, prop)
					}
					vs.Value.MaxLength = openapi3.Ptr(n)
				}
			default:
				return fmt.Errorf("collectionBounds: %s.%s is neither an array nor a map", schema, prop)
			}
		}
	}
	return nil
}

// The forms of the request strings the API checks, as ECMA-262 (and Go)
// regular expressions: swag has no tag for a pattern. Each is the server's
// rule or, where the server checks more than a pattern can say (a time
// zone that exists, a URL's port), the part a pattern can say; never more
// than the server refuses. api's TestSpecPatternsAreTheServers holds each
// to the server (and to package service's own patterns where it has them).
const (
	uuidPattern = `^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`
	// optionalUUIDPattern: an id, or empty for none (alert_endpoint_id).
	optionalUUIDPattern = `^([0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12})?$`
	// namePattern: a task's or workflow's name (service.NamePattern).
	namePattern = `^[\p{Ll}\p{Lo}\p{Lm}\p{Nd}][\p{Ll}\p{Lo}\p{Lm}\p{Mn}\p{Mc}\p{Nd}._-]{0,127}$`
	// nodeKeyPattern: a workflow node's key (dag.KeyPattern).
	nodeKeyPattern = `^[a-z0-9][a-z0-9._-]{0,63}$`
	// endpointNamePattern: not all spaces, no control character.
	endpointNamePattern = `^[^\x00-\x1f\x7f]*[^\x00-\x20\x7f][^\x00-\x1f\x7f]*$`
	// calendarNamePattern: not all spaces, no control character below
	// U+0020 (spaces around it are trimmed).
	calendarNamePattern = `^[^\x00-\x1f]*[^\x00-\x20][^\x00-\x1f]*$`
	// urlPattern: http or https, a host without user:password@, no
	// fragment, no whitespace or control character.
	urlPattern = `^[hH][tT][tT][pP][sS]?://[^\x00-\x20\x7f/?#@]+([/?][^\x00-\x20\x7f#]*)?$`
	// zonePattern: an IANA zone name's characters and segments; empty is
	// UTC.
	zonePattern = `^([A-Za-z0-9_+-]+(/[A-Za-z0-9_+-]+)*)?$`
	// datePattern: YYYY-MM-DD (format date says which dates exist).
	datePattern = `^[0-9]{4}-[0-9]{2}-[0-9]{2}$`
	// secretPattern: whsec_ and the base64 of 24 to 64 bytes.
	secretPattern = `^whsec_[A-Za-z0-9+/]{32,88}={0,2}$`
	// dedupKeyPattern: printable characters (Go's unicode.IsPrint).
	dedupKeyPattern = `^[\p{L}\p{M}\p{N}\p{P}\p{S} ]+$`
	// labelKeyPattern and labelValuePattern: a task's labels
	// (service.LabelKeyPattern; a value has no control character).
	labelKeyPattern   = `^[A-Za-z0-9][A-Za-z0-9._/-]{0,62}$`
	labelValuePattern = `^[^\x00-\x1f]*$`
	// headerNamePattern and headerValuePattern: an endpoint's headers
	// (service.HeaderNamePattern; a value has no line break or NUL).
	headerNamePattern  = "^[A-Za-z0-9!#$%&'*+.^_`|~-]{1,64}$"
	headerValuePattern = `^[^\r\n\x00]*$`
)

// stringPatterns are the patterns of request properties: "p" is the
// string property p, "p[]" the strings of the array p, "p{}" the values
// of the map p.
var stringPatterns = map[string]map[string]string{
	"EndpointRequest": {
		"name": endpointNamePattern, "url": urlPattern, "secret": secretPattern,
		"headers{}": headerValuePattern,
	},
	"RotateSecretRequest": {"secret": secretPattern},
	"TaskRequest": {
		"name": namePattern, "endpoint_id": uuidPattern, "alert_endpoint_id": optionalUUIDPattern,
		"labels{}": labelValuePattern,
	},
	"Schedule":        {"timezone": zonePattern, "exclude_calendars[]": uuidPattern},
	"WorkflowRequest": {"name": namePattern, "alert_endpoint_id": optionalUUIDPattern},
	"WorkflowNode":    {"key": nodeKeyPattern, "endpoint_id": uuidPattern, "depends_on[]": nodeKeyPattern},
	"CalendarRequest": {"name": calendarNamePattern, "timezone": zonePattern, "dates[]": datePattern},
	"TriggerRequest":  {"dedup_key": dedupKeyPattern},
}

// goStringFormats are the formats whose strings the Go client keeps as
// string (x-go-type): oapi-codegen would make them types of its runtime
// (openapi_types.UUID, Date), a breaking change for code that fills
// request structs from strings, for a format that only says what the
// pattern says.
var goStringFormats = []string{"uuid", "date"}

// keepGoStrings sets x-go-type string on every string schema with one of
// goStringFormats, at any depth (properties, array items, map values).
func keepGoStrings(doc *openapi3.T) {
	var walk func(s *openapi3.SchemaRef, depth int)
	walk = func(s *openapi3.SchemaRef, depth int) {
		if s == nil || s.Value == nil || s.Ref != "" && depth > 0 || depth > 8 {
			return
		}
		v := s.Value
		if v.Type.Is("string") && slices.Contains(goStringFormats, v.Format) {
			if v.Extensions == nil {
				v.Extensions = map[string]any{}
			}
			v.Extensions["x-go-type"] = "string"
		}
		for _, p := range v.Properties {
			walk(p, depth+1)
		}
		walk(v.Items, depth+1)
		walk(v.AdditionalProperties.Schema, depth+1)
	}
	for _, s := range doc.Components.Schemas {
		walk(s, 0)
	}
}

// propertyNamesExtension holds the pattern of a map's keys: OpenAPI 3.0
// has no propertyNames (3.1 has), so the rule is an extension that says
// it in the same words, and the map's description says it in prose.
const propertyNamesExtension = "x-propertyNames"

// keyPatterns are the patterns of request maps' keys.
var keyPatterns = map[string]map[string]string{
	"TaskRequest":     {"labels": labelKeyPattern},
	"EndpointRequest": {"headers": headerNamePattern},
}

// patterns sets the pattern of every property named in stringPatterns and
// the key pattern of every map named in keyPatterns.
func patterns(doc *openapi3.T) error {
	for _, schema := range slices.Sorted(maps.Keys(stringPatterns)) {
		ref := doc.Components.Schemas[schema]
		if ref == nil || ref.Value == nil {
			return fmt.Errorf("patterns: no schema %s", schema)
		}
		for key, pattern := range stringPatterns[schema] {
			prop, part := strings.TrimRight(key, "[]{}"), key[len(strings.TrimRight(key, "[]{}")):]
			p := ref.Value.Properties[prop]
			if p == nil || p.Value == nil || p.Ref != "" {
				return fmt.Errorf("patterns: %s has no inline property %s", schema, prop)
			}
			target := p.Value
			switch part {
			case "[]":
				target = nil
				if p.Value.Type.Is("array") && p.Value.Items != nil {
					target = p.Value.Items.Value
				}
			case "{}":
				target = nil
				if p.Value.Type.Is("object") && p.Value.AdditionalProperties.Schema != nil {
					target = p.Value.AdditionalProperties.Schema.Value
				}
			}
			if target == nil || !target.Type.Is("string") {
				return fmt.Errorf("patterns: %s.%s is not a string", schema, key)
			}
			target.Pattern = pattern
		}
	}
	for _, schema := range slices.Sorted(maps.Keys(keyPatterns)) {
		for prop, pattern := range keyPatterns[schema] {
			p := doc.Components.Schemas[schema].Value.Properties[prop]
			if p == nil || p.Value == nil || !p.Value.Type.Is("object") {
				return fmt.Errorf("patterns: %s.%s is not a map", schema, prop)
			}
			if p.Value.Extensions == nil {
				p.Value.Extensions = map[string]any{}
			}
			p.Value.Extensions[propertyNamesExtension] = map[string]any{"pattern": pattern}
		}
	}
	return nil
}

// exclusiveMinimums are the request properties whose minimum the API
// refuses itself (a rate of 0 is no rate); swag has no tag for
// exclusiveMinimum. Keep them in step with service.Limits.Set.
var exclusiveMinimums = map[string][]string{
	"TenantLimits": {"max_deliveries_per_second", "api_requests_per_second"},
}

// exclusiveMins sets exclusiveMinimum from exclusiveMinimums.
func exclusiveMins(doc *openapi3.T) error {
	for schema, props := range exclusiveMinimums {
		ref := doc.Components.Schemas[schema]
		if ref == nil || ref.Value == nil {
			return fmt.Errorf("exclusiveMins: no schema %s", schema)
		}
		for _, prop := range props {
			p := ref.Value.Properties[prop]
			if p == nil || p.Value == nil || p.Value.Min == nil {
				return fmt.Errorf("exclusiveMins: %s.%s has no minimum", schema, prop)
			}
			p.Value.ExclusiveMin = openapi3.ExclusiveBound{Bool: openapi3.Ptr(true)}
		}
	}
	return nil
}

// scheduleVariant is one type of schedule: the Schedule properties it
// takes, the ones it requires (besides type), and the ones it accepts only
// with their default, the first value of their enum (service.checkChoice:
// dialect "standard" and dst_policy "vixie" are accepted on any type).
type scheduleVariant struct {
	name         string
	props        []string
	required     []string
	defaultsOnly []string
}

// scheduleVariants: one Go struct (scheduleDTO) carries the three types of
// schedule, so swag writes a single object in which cron, interval_seconds
// and run_at are all optional. The API is stricter (schedule.Parse):
// a cron schedule needs cron, an interval one interval_seconds, a once one
// run_at, and each refuses the other types' fields (dialect and dst_policy
// are cron's). Swagger 2.0 has no oneOf, so this step rewrites Schedule as
// a oneOf of CronSchedule, IntervalSchedule and OnceSchedule with a
// discriminator on type, each variant taking its properties (descriptions,
// examples and bounds as swag wrote them from the Go tags) from the
// original Schedule. Generated clients get a tagged union; the validator
// refuses {"type":"cron"} and {"type":"interval","cron":"…"} as the server
// does.
var scheduleTypes = map[string]scheduleVariant{
	"cron":     {"CronSchedule", []string{"cron", "dialect", "dst_policy"}, []string{"cron"}, nil},
	"interval": {"IntervalSchedule", []string{"interval_seconds"}, []string{"interval_seconds"}, []string{"dialect", "dst_policy"}},
	"once":     {"OnceSchedule", []string{"run_at"}, []string{"run_at"}, []string{"dialect", "dst_policy"}},
	"union":    {"UnionSchedule", []string{"schedules"}, []string{"schedules"}, []string{"dialect", "dst_policy"}},
	"event":    {"EventSchedule", []string{"event"}, []string{"event"}, []string{"dialect", "dst_policy"}},
}

// scheduleCommon are the Schedule properties every type takes.
var scheduleCommon = []string{"type", "timezone", "start_at", "end_at", "exclude_calendars"}

func scheduleVariants(doc *openapi3.T) error {
	ref := doc.Components.Schemas["Schedule"]
	if ref == nil || ref.Value == nil {
		return errors.New("scheduleVariants: no Schedule schema")
	}
	orig := ref.Value
	typ := orig.Properties["type"]
	if typ == nil || typ.Value == nil {
		return errors.New("scheduleVariants: Schedule has no type")
	}
	var types []string
	for _, e := range typ.Value.Enum {
		types = append(types, fmt.Sprint(e))
	}
	if !slices.Equal(slices.Sorted(slices.Values(types)), slices.Sorted(maps.Keys(scheduleTypes))) {
		return fmt.Errorf("scheduleVariants: Schedule.type is one of %v; update scheduleTypes", types)
	}
	covered := map[string]bool{}
	disc := &openapi3.Discriminator{PropertyName: "type", Mapping: map[string]openapi3.MappingRef{}}
	one := openapi3.NewSchema()
	one.Description = "A schedule, by type: cron (cron required), interval (interval_seconds required), once (run_at required), " +
		"union (schedules required: 2 to 10 cron or interval schedules) or event (event required: fired once per event of that name, " +
		"no time slots). A field of another type is refused."
	for _, t := range types {
		variant := scheduleTypes[t]
		v := openapi3.NewObjectSchema()
		v.Description = article(t) + " " + t + " schedule."
		v.Required = append([]string{"type"}, variant.required...)
		for _, p := range append(slices.Clone(scheduleCommon), variant.props...) {
			prop := orig.Properties[p]
			if prop == nil {
				return fmt.Errorf("scheduleVariants: Schedule has no property %s", p)
			}
			covered[p] = true
			if p == "type" {
				tv := *prop.Value
				tv.Enum, tv.Example = []any{t}, t
				prop = &openapi3.SchemaRef{Value: &tv}
			}
			if p == "cron" {
				cv := *prop.Value
				cv.MinLength = 1 // blank is the same as absent
				prop = &openapi3.SchemaRef{Value: &cv}
			}
			v.Properties[p] = prop
		}
		for _, p := range variant.defaultsOnly {
			prop := orig.Properties[p]
			if prop == nil || prop.Value == nil || len(prop.Value.Enum) == 0 {
				return fmt.Errorf("scheduleVariants: Schedule.%s is not an enum", p)
			}
			dv := *prop.Value
			dv.Enum, dv.Example = dv.Enum[:1], dv.Enum[0]
			dv.Description = fmt.Sprintf("Only %v, the default, is accepted: %s applies to cron schedules.", dv.Enum[0], p)
			v.Properties[p] = &openapi3.SchemaRef{Value: &dv}
		}
		doc.Components.Schemas[variant.name] = &openapi3.SchemaRef{Value: v}
		disc.Mapping[t] = openapi3.MappingRef{Ref: schemaRefPrefix + variant.name, Value: v}
		one.OneOf = append(one.OneOf, &openapi3.SchemaRef{Ref: schemaRefPrefix + variant.name, Value: v})
	}
	for p := range orig.Properties {
		if !covered[p] {
			return fmt.Errorf("scheduleVariants: Schedule.%s belongs to no type; update scheduleTypes", p)
		}
	}
	one.Discriminator = disc
	ref.Value = one
	unionMembers(doc)
	return nil
}

// workflowSchedules points the workflows' schedule at WorkflowSchedule,
// Schedule without its union: the workflow scheduler reads cron,
// interval and once schedules only.
func workflowSchedules(doc *openapi3.T) {
	all := doc.Components.Schemas["Schedule"].Value
	ws := *all
	ws.Description = "A workflow's schedule, by type: cron (cron required), interval (interval_seconds required) or once " +
		"(run_at required). A field of another type is refused."
	ws.OneOf = nil
	ws.Discriminator = &openapi3.Discriminator{PropertyName: "type", Mapping: map[string]openapi3.MappingRef{}}
	for t, m := range all.Discriminator.Mapping {
		if t != "union" {
			ws.Discriminator.Mapping[t] = m
		}
	}
	for _, o := range all.OneOf {
		if o.Ref != schemaRefPrefix+scheduleTypes["union"].name {
			ws.OneOf = append(ws.OneOf, o)
		}
	}
	doc.Components.Schemas["WorkflowSchedule"] = &openapi3.SchemaRef{Value: &ws}
	for _, name := range slices.Sorted(maps.Keys(doc.Components.Schemas)) {
		sc := doc.Components.Schemas[name].Value
		if !strings.HasPrefix(name, "Workflow") || sc == nil || sc.Properties["schedule"] == nil || sc.Properties["schedule"].Value == nil {
			continue
		}
		prop := *sc.Properties["schedule"].Value
		for i, r := range prop.AllOf {
			if r.Ref == schemaRefPrefix+"Schedule" {
				prop.AllOf = slices.Clone(prop.AllOf)
				prop.AllOf[i] = &openapi3.SchemaRef{Ref: schemaRefPrefix + "WorkflowSchedule", Value: &ws}
			}
		}
		sc.Properties["schedule"] = &openapi3.SchemaRef{Value: &prop}
	}
}

// unionMembers makes a union's schedules a list of UnionMember, a cron or
// an interval schedule, rather than of Schedule: the document then says
// what the API takes (no union in a union, no once), and is not recursive.
func unionMembers(doc *openapi3.T) {
	u := doc.Components.Schemas[scheduleTypes["union"].name]
	if u == nil || u.Value == nil || u.Value.Properties["schedules"] == nil {
		return
	}
	member := openapi3.NewSchema()
	member.Description = "A union's member: a cron or an interval schedule."
	member.Discriminator = &openapi3.Discriminator{PropertyName: "type", Mapping: map[string]openapi3.MappingRef{}}
	for _, t := range []string{"cron", "interval"} {
		name := scheduleTypes[t].name
		r := &openapi3.SchemaRef{Ref: schemaRefPrefix + name, Value: doc.Components.Schemas[name].Value}
		member.OneOf = append(member.OneOf, r)
		member.Discriminator.Mapping[t] = openapi3.MappingRef{Ref: schemaRefPrefix + name, Value: r.Value}
	}
	doc.Components.Schemas["UnionMember"] = &openapi3.SchemaRef{Value: member}
	if tz := u.Value.Properties["timezone"]; tz != nil && tz.Value != nil {
		only := *tz.Value
		only.Enum, only.Example = []any{"UTC"}, "UTC"
		only.Description = "Only UTC, the default, is accepted: each of a union's schedules has its own timezone."
		u.Value.Properties["timezone"] = &openapi3.SchemaRef{Value: &only}
	}
	workflowSchedules(doc)
	list := *u.Value.Properties["schedules"].Value
	list.Items = &openapi3.SchemaRef{Ref: schemaRefPrefix + "UnionMember", Value: member}
	u.Value.Properties["schedules"] = &openapi3.SchemaRef{Value: &list}
}

// article is the indefinite article before word (a cron, an interval).
func article(word string) string {
	if word != "" && strings.ContainsRune("aeiou", rune(word[0])) && !strings.HasPrefix(word, "one") && !strings.HasPrefix(word, "once") &&
		!strings.HasPrefix(word, "uni") {
		return "An"
	}
	return "A"
}

// refusedWhenEmpty are the query parameters the API refuses with a 400
// when present but empty (?limit=); every other one treats an empty value
// as absent (?state= lists every state, ?cursor= is the first page). Keep
// it in step with the presentButEmpty calls in package api.
var refusedWhenEmpty = map[string]bool{"limit": true, "count": true}

// queryRanges are the bounds the API enforces on its integer query
// parameters (pageParams and previewTask in package api): limit is at
// least 1 (larger than 500 is clamped, not refused), count 1..1000.
var queryRanges = map[string][2]float64{"limit": {1, 0}, "count": {1, 1000}}

// emptyMeansAbsent sets allowEmptyValue on the query parameters that take
// an empty value as absent, and the bounds of the integer ones.
func emptyMeansAbsent(op *openapi3.Operation) {
	for _, p := range op.Parameters {
		if p.Value == nil || p.Value.In != openapi3.ParameterInQuery {
			continue
		}
		if !refusedWhenEmpty[p.Value.Name] {
			p.Value.AllowEmptyValue = true
		}
		if r, ok := queryRanges[p.Value.Name]; ok && p.Value.Schema != nil && p.Value.Schema.Value != nil &&
			p.Value.Schema.Value.Type.Is("integer") {
			p.Value.Schema.Value.Min = openapi3.Ptr(r[0])
			if r[1] > 0 {
				p.Value.Schema.Value.Max = openapi3.Ptr(r[1])
			}
		}
	}
}

// addProblem declares a problem response for code unless op already has one.
func addProblem(doc *openapi3.T, op *openapi3.Operation, code, desc string) {
	if op.Responses.Value(code) != nil {
		return
	}
	op.Responses.Set(code, &openapi3.ResponseRef{Value: &openapi3.Response{
		Description: &desc,
		Content:     openapi3.NewContentWithSchemaRef(&openapi3.SchemaRef{Ref: schemaRefPrefix + "Problem", Value: problemSchema(doc)}, []string{problemContentType}),
	}})
}

// rateLimitHeaders declares the headers a 429 carries.
func rateLimitHeaders(r *openapi3.Response) {
	if r.Headers == nil {
		r.Headers = openapi3.Headers{}
	}
	for name, desc := range map[string]string{
		"Retry-After":         "seconds to wait before the next request",
		"RateLimit-Limit":     "the tenant's requests per second",
		"RateLimit-Remaining": "requests left in the current window",
		"RateLimit-Reset":     "seconds until the window resets",
	} {
		if _, ok := r.Headers[name]; !ok {
			r.Headers[name] = &openapi3.HeaderRef{Value: &openapi3.Header{Parameter: openapi3.Parameter{
				Description: desc, Schema: openapi3.NewIntegerSchema().NewRef(),
			}}}
		}
	}
}

// hasHeaderParam reports whether op takes the header parameter name, and
// bounds it as the API does (1..255 printable ASCII characters, space
// included; empty is refused too).
func hasHeaderParam(op *openapi3.Operation, name string) bool {
	for _, p := range op.Parameters {
		if p.Value != nil && p.Value.In == openapi3.ParameterInHeader && strings.EqualFold(p.Value.Name, name) {
			if s := p.Value.Schema; s != nil && s.Value != nil {
				s.Value.MinLength, s.Value.MaxLength = 1, openapi3.Ptr(uint64(255))
				s.Value.Pattern = `^[ -~]+$`
			}
			return true
		}
	}
	return false
}

// anyJSON turns every property whose schema is a bare `type: object` (what
// swaggertype:"object" makes of a json.RawMessage: a payload, an output,
// progress, audit changes) into a schema that accepts any JSON value, null
// included, which is what the API takes and returns there. A bare object
// would make generators type it as an empty record. OpenAPI 3.0 has no
// "any type" that admits null: `nullable` needs a `type` beside it (Redocly's
// nullable-type-sibling rule, and OpenAPI 3.0.3 §4.7.24.1), and a schema
// with neither is read as refusing null by validators such as kin-openapi.
// So the schema is an anyOf of the JSON types, null allowed with the
// object, and Go clients keep interface{} (x-go-type) rather than a union.
func anyJSON(doc *openapi3.T) {
	for _, ref := range doc.Components.Schemas {
		if ref.Value == nil {
			continue
		}
		for _, p := range ref.Value.Properties {
			v := p.Value
			if p.Ref != "" || v == nil || !v.Type.Is("object") || !isEmptyObject(v) {
				continue
			}
			v.Type = nil
			v.Nullable = false
			object := openapi3.NewObjectSchema()
			object.Nullable = true
			object.AdditionalProperties = openapi3.AdditionalProperties{Has: openapi3.Ptr(true)}
			v.AnyOf = openapi3.SchemaRefs{
				object.NewRef(), openapi3.NewArraySchema().WithItems(openapi3.NewSchema()).NewRef(),
				openapi3.NewStringSchema().NewRef(), openapi3.NewFloat64Schema().NewRef(), openapi3.NewBoolSchema().NewRef(),
			}
			if v.Extensions == nil {
				v.Extensions = map[string]any{}
			}
			v.Extensions["x-go-type"] = "interface{}"
			v.Extensions["x-go-type-skip-optional-pointer"] = true
		}
	}
}

// typedNullables gives a type to every nullable property that has none: a
// $ref with a description of its own, which swag writes as an allOf of the
// one referenced schema (an SLA, a completion, a schedule). OpenAPI 3.0.3
// reads nullable only beside a type (Redocly's nullable-type-sibling rule);
// the referenced schemas are objects. Validators (kin-openapi) and
// generators (openapi-typescript, oapi-codegen) read the null at this level.
func typedNullables(doc *openapi3.T) error {
	for _, name := range slices.Sorted(maps.Keys(doc.Components.Schemas)) {
		ref := doc.Components.Schemas[name]
		if ref.Value == nil {
			continue
		}
		for prop, p := range ref.Value.Properties {
			v := p.Value
			if p.Ref != "" || v == nil || !v.Nullable || v.Type != nil {
				continue
			}
			if len(v.AllOf) != 1 {
				return fmt.Errorf("typedNullables: %s.%s is nullable without a type and is not a wrapped $ref", name, prop)
			}
			target := v.AllOf[0].Value
			if n, ok := strings.CutPrefix(v.AllOf[0].Ref, schemaRefPrefix); ok && doc.Components.Schemas[n] != nil {
				target = doc.Components.Schemas[n].Value
			}
			if target == nil || !(target.Type.Is("object") || len(target.OneOf) > 0) {
				return fmt.Errorf("typedNullables: %s.%s wraps a schema that is not an object", name, prop)
			}
			v.Type = &openapi3.Types{openapi3.TypeObject}
		}
	}
	return nil
}

// patchExtension marks a request field that a create takes and a PATCH
// refuses (an endpoint's secret: rotate-secret changes it).
const patchExtension = "x-patch-read-only"

// patchSchemas gives every PATCH its own body schema, NamePatch: the
// create schema (Name) without required fields, since a PATCH body holds
// only the fields to change, and without the fields tagged
// x-patch-read-only. Nested schemas (a schedule, a retry policy) are
// replaced whole by a PATCH, so they keep their required fields.
func patchSchemas(doc *openapi3.T) {
	for _, item := range doc.Paths.Map() {
		op := item.Patch
		if op == nil || op.RequestBody == nil || op.RequestBody.Value == nil {
			continue
		}
		for _, media := range op.RequestBody.Value.Content {
			name, ok := strings.CutPrefix(media.Schema.Ref, schemaRefPrefix)
			if !ok || doc.Components.Schemas[name] == nil {
				continue
			}
			patch := name + "Patch"
			if doc.Components.Schemas[patch] == nil {
				v := *doc.Components.Schemas[name].Value
				v.Required = nil
				v.Properties = openapi3.Schemas{}
				for prop, ref := range doc.Components.Schemas[name].Value.Properties {
					if ref.Value != nil && ref.Value.Extensions[patchExtension] != nil {
						continue
					}
					v.Properties[prop] = ref
				}
				v.Description = "The fields to change (a JSON merge of " + name + "): absent fields stay as they are."
				doc.Components.Schemas[patch] = &openapi3.SchemaRef{Value: &v}
			}
			media.Schema = &openapi3.SchemaRef{Ref: schemaRefPrefix + patch, Value: doc.Components.Schemas[patch].Value}
		}
	}
	for _, ref := range doc.Components.Schemas {
		for _, p := range ref.Value.Properties {
			if p.Value != nil {
				delete(p.Value.Extensions, patchExtension)
			}
		}
	}
}

// closeRequestSchemas sets additionalProperties: false on every object
// schema a request body uses, directly or nested: the API decodes bodies
// strictly and refuses an unknown field with a 422 naming its path.
func closeRequestSchemas(doc *openapi3.T) {
	used := map[string]bool{}
	for _, item := range doc.Paths.Map() {
		for _, op := range item.Operations() {
			if op.RequestBody != nil && op.RequestBody.Value != nil {
				for _, m := range op.RequestBody.Value.Content {
					mark(doc, m.Schema, used)
				}
			}
		}
	}
	closed := false
	for name := range used {
		v := doc.Components.Schemas[name].Value
		if v != nil && v.Type.Is("object") && len(v.Properties) > 0 && v.AdditionalProperties.Schema == nil {
			v.AdditionalProperties = openapi3.AdditionalProperties{Has: &closed}
		}
	}
}

// isEmptyObject reports whether a named schema says nothing at all, which
// is what swag writes for a struct it failed to parse.
func isEmptyObject(v *openapi3.Schema) bool {
	return (v.Type == nil || v.Type.Is("object")) && len(v.Properties) == 0 &&
		v.AdditionalProperties.Schema == nil && v.AdditionalProperties.Has == nil &&
		len(v.AllOf) == 0 && len(v.AnyOf) == 0 && len(v.OneOf) == 0
}

// isError reports whether a response code is a 4xx or 5xx one (or default).
func isError(code string) bool {
	return code == "default" || strings.HasPrefix(code, "4") || strings.HasPrefix(code, "5")
}

// asProblem makes an error response's body application/problem+json and
// gives a 401 its challenge header.
func asProblem(r *openapi3.Response, code string) error {
	var media *openapi3.MediaType
	for _, m := range r.Content {
		if media != nil && (m.Schema == nil || media.Schema == nil || m.Schema.Ref != media.Schema.Ref) {
			return errors.New("an error response has one body schema, the problem")
		}
		media = m
	}
	if media != nil {
		r.Content = openapi3.Content{problemContentType: media}
	}
	if _, ok := r.Headers["WWW-Authenticate"]; code == "401" && !ok {
		if r.Headers == nil {
			r.Headers = openapi3.Headers{}
		}
		r.Headers["WWW-Authenticate"] = &openapi3.HeaderRef{Value: &openapi3.Header{Parameter: openapi3.Parameter{
			Description: "The bearer challenge, e.g. `Bearer realm=\"ax\", error=\"invalid_token\"`.",
			Schema:      openapi3.NewStringSchema().NewRef(),
		}}}
	}
	return nil
}

// encode writes doc as indented JSON with sorted keys, without escaping
// <, > and & as json.Marshal does, ending with a newline.
func encode(doc *openapi3.T) ([]byte, error) {
	raw, err := json.Marshal(doc)
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// problemSchema is the Problem schema's value (nil when there is none,
// which validation then reports).
func problemSchema(doc *openapi3.T) *openapi3.Schema {
	if ref := doc.Components.Schemas["Problem"]; ref != nil {
		return ref.Value
	}
	return nil
}
