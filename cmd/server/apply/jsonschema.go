package apply

import (
	"encoding/json"
	"slices"
	"strings"
)

// JSONSchema is the document format as a JSON Schema (2020-12), built
// from the API's create bodies as apply reads them (references by name,
// no spec.name): editors and CI linters can check files with it. `go
// generate` in package openapi writes it to openapi/apply.schema.json.
func JSONSchema() ([]byte, error) {
	defs := map[string]any{}
	var oneOf []any
	for _, k := range kinds {
		spec := k.name + "Spec"
		oneOf = append(oneOf, map[string]any{"$ref": "#/$defs/" + k.name})
		defs[k.name] = map[string]any{
			"type": "object", "additionalProperties": false, "required": []any{"kind", "name", "spec"},
			"properties": map[string]any{
				"kind": map[string]any{"const": k.name},
				"name": map[string]any{"type": "string", "minLength": 1, "description": "The " + strings.ToLower(k.name) + "'s name."},
				"spec": map[string]any{"$ref": "#/$defs/" + spec},
			},
		}
		body := jsonSchemaOf(schemas()[k.create], defs).(map[string]any)
		props := body["properties"].(map[string]any)
		delete(props, "name")
		req := []any{}
		for _, r := range body["required"].([]any) {
			if r != "name" {
				req = append(req, r)
			}
		}
		body["required"] = req
		defs[spec] = body
	}
	return json.MarshalIndent(map[string]any{
		"$schema":     "https://json-schema.org/draft/2020-12/schema",
		"title":       "ax apply document",
		"description": "A document of ax apply and ax export: a kind, a name and the create body of the API with references by name. Generated from openapi.json; see docs/schedules-as-code.md.",
		"oneOf":       oneOf,
		"$defs":       defs,
	}, "", "  ")
}

// jsonSchemaOf converts an OpenAPI 3.0 schema: nullable becomes a null
// type, references point into $defs (converting the component they name),
// reference fields take names, OpenAPI-only keywords go.
func jsonSchemaOf(v any, defs map[string]any) any {
	switch x := v.(type) {
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = jsonSchemaOf(e, defs)
		}
		return out
	case map[string]any:
		out := map[string]any{}
		for k, e := range x {
			switch {
			case strings.HasPrefix(k, "x-"), k == "example", k == "discriminator", k == "nullable":
				continue
			case k == "$ref":
				name := strings.TrimPrefix(e.(string), "#/components/schemas/")
				if _, ok := defs[name]; !ok {
					defs[name] = true // being converted
					defs[name] = jsonSchemaOf(schemas()[name], defs)
				}
				out[k] = "#/$defs/" + name
			case k == "properties":
				props := map[string]any{}
				for p, ps := range e.(map[string]any) {
					r, isRef := refOfAPI(p)
					switch {
					case isRef && r.list:
						props[r.doc] = map[string]any{
							"type": "array", "items": map[string]any{"type": "string"},
							"description": "Names of " + strings.ToLower(r.kind) + "s (the API takes their ids).",
						}
					case isRef:
						props[r.doc] = map[string]any{"type": "string", "description": "The name of an " + strings.ToLower(r.kind) + " (the API takes its id as " + r.api + ")."}
					default:
						props[p] = jsonSchemaOf(ps, defs)
					}
				}
				out[k] = props
			case k == "required":
				var req []any
				for _, r := range e.([]any) {
					if ref, ok := refOfAPI(r.(string)); ok {
						r = ref.doc
					}
					req = append(req, r)
				}
				out[k] = req
			default:
				out[k] = jsonSchemaOf(e, defs)
			}
		}
		if x["nullable"] == true {
			if _, ok := out["allOf"]; ok {
				return map[string]any{"anyOf": []any{map[string]any{"allOf": out["allOf"]}, map[string]any{"type": "null"}}}
			}
			if t, ok := out["type"].(string); ok {
				out["type"] = []any{t, "null"}
			}
			if alts, ok := out["anyOf"].([]any); ok && !slices.ContainsFunc(alts, isNullType) {
				out["anyOf"] = append(alts, map[string]any{"type": "null"})
			}
		}
		return out
	}
	return v
}

func isNullType(v any) bool {
	m, _ := v.(map[string]any)
	return m["type"] == "null"
}
