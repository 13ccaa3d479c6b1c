package apply

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/axhq/ax/openapi/client"
)

// Export returns every endpoint (without its secret, which the API never
// shows again), calendar, task and workflow of the tenant as documents,
// in apply's order: only the create body's fields, defaults left out,
// references by name, apply's label left out.
func Export(ctx context.Context, c *client.ClientWithResponses) ([]Document, error) {
	have, err := fetch(ctx, c)
	if err != nil {
		return nil, err
	}
	names := map[string]string{} // kind\x00id → name
	for kind, byName := range have {
		for name, rs := range byName {
			for _, r := range rs {
				names[kind+"\x00"+str(r["id"])] = name
			}
		}
	}
	nameOf := func(kind, id string) string {
		if n, ok := names[kind+"\x00"+id]; ok {
			return n
		}
		return id
	}
	var docs []Document
	for _, k := range kinds {
		for _, name := range sortedKeys(have[k.name]) {
			for _, r := range have[k.name][name] {
				docs = append(docs, Document{Kind: k.name, Name: name, Spec: specOf(k, r, nameOf)})
			}
		}
	}
	Sort(docs)
	return docs, nil
}

func specOf(k *kind, r resource, nameOf func(kind, id string) string) map[string]any {
	s := deref(schemas()[k.create])
	spec := refsToDoc(exportForm(r, s), s, nameOf)
	delete(spec, "name")
	delete(spec, "secret")
	if k.name == "Endpoint" && spec["enabled"] == true {
		delete(spec, "enabled") // ax's default; false (ax disabled it, or someone did) is kept
	}
	if labels, ok := spec["labels"].(map[string]any); ok {
		delete(labels, ManagedLabel)
		if len(labels) == 0 {
			delete(spec, "labels")
		}
	}
	return spec
}

// Encode writes documents as YAML, one after the other (---).
func Encode(docs []Document) ([]byte, error) {
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	for _, d := range docs {
		if err := enc.Encode(d); err != nil {
			return nil, err
		}
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// WriteDir writes one file per document under dir: endpoints/NAME.yaml,
// calendars/…, tasks/…, workflows/…; it returns the files' paths.
func WriteDir(dir string, docs []Document) ([]string, error) {
	var paths []string
	used := map[string]bool{}
	for _, d := range docs {
		k := kindOf(d.Kind)
		base := fileName(d.Name)
		p := filepath.Join(dir, k.dir, base+".yaml")
		for i := 2; used[p]; i++ {
			p = filepath.Join(dir, k.dir, fmt.Sprintf("%s-%d.yaml", base, i))
		}
		used[p] = true
		b, err := Encode([]Document{d})
		if err != nil {
			return nil, err
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o750); err != nil {
			return nil, err
		}
		if err := os.WriteFile(p, b, 0o600); err != nil {
			return nil, err
		}
		paths = append(paths, p)
	}
	return paths, nil
}

// fileName is a resource name fit for a file name: an endpoint's or a
// calendar's name may hold a / or start with a dot.
func fileName(name string) string {
	r := strings.NewReplacer("/", "_", "\\", "_", "\x00", "_")
	n := r.Replace(strings.TrimSpace(name))
	if n == "" || strings.HasPrefix(n, ".") {
		n = "_" + n
	}
	return n
}
