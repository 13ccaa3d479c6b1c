// Package apply is ax's schedules as code: documents
// ({"kind", "name", "spec"}) read from YAML or JSON files, compared with
// a tenant's resources through the API, and created, updated or pruned
// (`ax apply`); and the tenant's resources written back as documents
// (`ax export`). A spec is the resource's create body from the API's
// OpenAPI document, with references by name (endpoint, alert_endpoint,
// exclude_calendars) instead of ids, so a field the API adds flows
// through without a change here.
package apply

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/axhq/ax/api/yamldoc"
)

// Document is one resource as the files hold it.
type Document struct {
	Kind string         `json:"kind" yaml:"kind"`
	Name string         `json:"name" yaml:"name"`
	Spec map[string]any `json:"spec" yaml:"spec"`

	// File and Index (from 1) say where it was read, for messages.
	File  string `json:"-" yaml:"-"`
	Index int    `json:"-" yaml:"-"`
}

func (d Document) String() string { return d.Kind + "/" + d.Name }

// FieldError is a problem with one field of a document.
type FieldError struct {
	Field   string
	Message string
}

// DocError is a document apply refuses, located by file, document and field.
type DocError struct {
	File  string
	Index int
	Doc   string // Kind/name, when known
	FieldError
}

func (e *DocError) Error() string {
	where := fmt.Sprintf("%s: document %d", e.File, e.Index)
	if e.Doc != "" {
		where += " (" + e.Doc + ")"
	}
	if e.Field == "" {
		return where + ": " + e.Message
	}
	return where + ": " + e.Field + ": " + e.Message
}

// Errors are every refused document of a set of files.
type Errors []*DocError

func (es Errors) Error() string {
	lines := make([]string, len(es))
	for i, e := range es {
		lines[i] = e.Error()
	}
	return strings.Join(lines, "\n")
}

// Load reads the documents of path: a .yaml, .yml or .json file, a
// directory of them (walked in name order), or "-" for stdin. It checks
// each document's shape (kind, name, the spec's fields against the API's
// create body); references are checked by Plan, which knows the tenant.
func Load(path string, stdin io.Reader) ([]Document, error) {
	var files []string
	if path == "-" {
		b, err := io.ReadAll(stdin)
		if err != nil {
			return nil, fmt.Errorf("read stdin: %w", err)
		}
		return parse("-", b)
	}
	info, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if !info.IsDir() {
		files = []string{path}
	} else {
		err := filepath.WalkDir(path, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() && p != path && strings.HasPrefix(d.Name(), ".") {
				return filepath.SkipDir
			}
			switch filepath.Ext(p) {
			case ".yaml", ".yml", ".json":
				if !d.IsDir() {
					files = append(files, p)
				}
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
		if len(files) == 0 {
			return nil, fmt.Errorf("%s holds no .yaml, .yml or .json file", path)
		}
	}
	var docs []Document
	var errs Errors
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		ds, err := parse(f, b)
		var de Errors
		switch {
		case errors.As(err, &de):
			errs = append(errs, de...)
		case err != nil:
			return nil, err
		}
		docs = append(docs, ds...)
	}
	if err := duplicates(docs); err != nil {
		errs = append(errs, err...)
	}
	if len(errs) > 0 {
		return nil, errs
	}
	return docs, nil
}

// parse decodes the documents of one file (YAML, of which JSON is a part;
// several documents separated by ---).
func parse(file string, b []byte) ([]Document, error) {
	dec := yaml.NewDecoder(bytes.NewReader(b))
	var docs []Document
	var errs Errors
	for i := 1; ; i++ {
		var node yaml.Node
		err := dec.Decode(&node)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			errs = append(errs, &DocError{File: file, Index: i, FieldError: FieldError{Message: "not YAML or JSON: " + err.Error()}})
			break
		}
		yamldoc.KeepTimestamps(&node)
		var raw any
		if err := node.Decode(&raw); err != nil {
			errs = append(errs, &DocError{File: file, Index: i, FieldError: FieldError{Message: err.Error()}})
			continue
		}
		if raw == nil {
			i-- // an empty document (a trailing ---) is not counted
			continue
		}
		d, de := document(file, i, raw)
		if de != nil {
			errs = append(errs, de)
			continue
		}
		docs = append(docs, d)
	}
	if len(errs) > 0 {
		return docs, errs
	}
	return docs, nil
}

func document(file string, index int, raw any) (Document, *DocError) {
	fail := func(doc, field, msg string) (Document, *DocError) {
		return Document{}, &DocError{File: file, Index: index, Doc: doc, FieldError: FieldError{Field: field, Message: msg}}
	}
	v, err := normalize(raw)
	if err != nil {
		return fail("", "", err.Error())
	}
	m, ok := v.(map[string]any)
	if !ok {
		return fail("", "", `must be an object with kind, name and spec`)
	}
	for _, k := range sortedKeys(m) {
		if k != "kind" && k != "name" && k != "spec" {
			return fail("", k, "is not a field of a document (kind, name, spec)")
		}
	}
	d := Document{File: file, Index: index}
	d.Kind, _ = m["kind"].(string)
	k := kindOf(d.Kind)
	if k == nil {
		return fail("", "kind", "must be one of "+strings.Join(kindNames(), ", "))
	}
	d.Name, _ = m["name"].(string)
	if d.Name == "" {
		return fail("", "name", "is required (a string)")
	}
	spec, ok := m["spec"].(map[string]any)
	if !ok {
		return fail(d.String(), "spec", "is required (an object: the create body)")
	}
	if n, ok := spec["name"]; ok && n != d.Name {
		return fail(d.String(), "spec.name", "differs from the document's name (leave it out)")
	}
	delete(spec, "name")
	d.Spec = spec
	// The shape, with every reference standing for a resource that exists.
	body, fe := k.toAPI(spec, func(string, string) (string, bool) { return placeholderID, true })
	if fe == nil {
		body["name"] = d.Name
		fe = check(body, schemas()[k.create], "")
		if fe != nil {
			fe.Field = docField(fe.Field)
		}
	}
	if fe != nil {
		fe.Field = join("spec", fe.Field)
		if fe.Field == "spec.name" {
			fe.Field = "name"
		}
		return fail(d.String(), fe.Field, fe.Message)
	}
	return d, nil
}

// placeholderID stands for a resource an apply has not created yet.
const placeholderID = "00000000-0000-4000-8000-000000000000"

func duplicates(docs []Document) Errors {
	seen := map[string]Document{}
	var errs Errors
	for _, d := range docs {
		key := d.Kind + "\x00" + d.Name
		if first, ok := seen[key]; ok {
			errs = append(errs, &DocError{
				File: d.File, Index: d.Index, Doc: d.String(),
				FieldError: FieldError{Field: "name", Message: fmt.Sprintf("%s is also in %s, document %d", d, first.File, first.Index)},
			})
			continue
		}
		seen[key] = d
	}
	return errs
}

// normalize turns decoded YAML or JSON into the JSON data model with
// integers as int64 and other numbers as float64, so documents and API
// answers compare alike.
func normalize(v any) (any, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("not representable as JSON (keys must be strings): %w", err)
	}
	return decodeJSON(b)
}

func decodeJSON(b []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	return numbers(v), nil
}

func numbers(v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			x[k] = numbers(e)
		}
	case []any:
		for i, e := range x {
			x[i] = numbers(e)
		}
	case json.Number:
		if n, err := x.Int64(); err == nil {
			return n
		}
		f, _ := x.Float64()
		return f
	}
	return v
}

// docField names an API field (a path) as documents spell it.
func docField(path string) string {
	parts := strings.Split(path, ".")
	for i, p := range parts {
		base, idx, _ := strings.Cut(p, "[")
		for _, r := range refs {
			if base == r.api && r.api != r.doc {
				parts[i] = r.doc
				if idx != "" {
					parts[i] += "[" + idx
				}
			}
		}
	}
	return strings.Join(parts, ".")
}

func kindNames() []string {
	names := make([]string, len(kinds))
	for i, k := range kinds {
		names[i] = k.name
	}
	return names
}

// Sort orders documents as apply processes them: by kind (what others
// refer to first: kinds is in that order), then by name.
func Sort(docs []Document) {
	order := func(name string) int { return slices.IndexFunc(kinds, func(k *kind) bool { return k.name == name }) }
	slices.SortStableFunc(docs, func(a, b Document) int {
		if c := order(a.Kind) - order(b.Kind); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
}
