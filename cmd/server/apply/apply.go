package apply

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/axhq/ax/openapi/client"
)

// Options tune Apply.
type Options struct {
	DryRun bool // say what would change, change nothing
	Prune  bool // delete what apply created and the documents no longer hold
	Diff   bool // under each update, each field's value before and after
	// Workers is how many writes of one phase run at once (default 8).
	Workers int
}

// WorkersDefault is Options.Workers' default.
const WorkersDefault = 8

// Summary counts what an apply did (or would do, in a dry run).
type Summary struct {
	Created, Updated, Unchanged, Deleted int
}

// Writes is how many API writes the apply made (or would make).
func (s Summary) Writes() int { return s.Created + s.Updated + s.Deleted }

// resource is a server resource as JSON.
type resource = map[string]any

// tenant is what the tenant holds, by kind and then name.
type tenant map[string]map[string][]resource

// step is one line of the apply: a document to create, update or leave,
// or a resource to delete.
type step struct {
	kind   *kind
	name   string
	doc    *Document
	have   resource // nil: create
	op     string   // create, update, unchanged, delete
	fields []string // update: what differs
	err    error
}

// Apply makes the tenant's resources match docs (read by Load) and
// writes one line per resource to out. It reads everything first and
// refuses, before any write, a document whose references do not resolve.
func Apply(ctx context.Context, c *client.ClientWithResponses, docs []Document, opt Options, out io.Writer) (Summary, error) {
	if opt.Workers <= 0 {
		opt.Workers = WorkersDefault
	}
	docs = slices.Clone(docs)
	Sort(docs)
	have, err := fetch(ctx, c)
	if err != nil {
		return Summary{}, err
	}
	inFiles := map[string]bool{}
	for _, d := range docs {
		inFiles[d.Kind+"\x00"+d.Name] = true
	}
	// Plan every document with a stand-in id for what is still to be
	// created: every reference is checked before anything is written.
	planFind := func(kind, name string) (string, bool) {
		if rs := have[kind][name]; len(rs) == 1 {
			return str(rs[0]["id"]), true
		}
		return placeholderID, inFiles[kind+"\x00"+name] && len(have[kind][name]) == 0
	}
	var errs Errors
	steps := make([]*step, len(docs))
	for i := range docs {
		d := &docs[i]
		st, fe := plan(d, have, planFind)
		if fe != nil {
			errs = append(errs, &DocError{File: d.File, Index: d.Index, Doc: d.String(), FieldError: *fe})
			continue
		}
		steps[i] = st
	}
	if len(errs) > 0 {
		return Summary{}, errs
	}
	var prune []*step
	if opt.Prune {
		if prune, err = pruneSteps(ctx, c, have, inFiles); err != nil {
			return Summary{}, err
		}
	}
	var sum Summary
	report := func(st *step) {
		line := st.kind.name + "/" + st.name + " "
		verb := map[string]string{"create": "created", "update": "updated", "delete": "deleted", "unchanged": "unchanged"}[st.op]
		if opt.DryRun && st.op != "unchanged" {
			verb = "would " + st.op
		}
		line += verb
		if st.op == "update" {
			fields := make([]string, len(st.fields))
			for i, f := range st.fields {
				fields[i] = docField(f)
			}
			line += ": " + strings.Join(fields, ", ")
		}
		if st.err != nil {
			line = st.kind.name + "/" + st.name + " " + st.op + " failed: " + strings.TrimPrefix(st.err.Error(), "ax: ")
		} else {
			switch st.op {
			case "create":
				sum.Created++
			case "update":
				sum.Updated++
			case "delete":
				sum.Deleted++
			default:
				sum.Unchanged++
			}
		}
		fmt.Fprintln(out, line)
		if opt.Diff && st.op == "update" && st.err == nil {
			for _, l := range diffLines(st, have) {
				fmt.Fprintln(out, l)
			}
		}
	}
	if opt.DryRun {
		for _, st := range append(steps, prune...) {
			report(st)
		}
		return sum, nil
	}
	// The writes, phase after phase: what others refer to first, then
	// the documents that refer to it (now with the real ids), then the
	// deletions, those that refer first.
	created := map[string]string{} // kind\x00name → id
	var mu sync.Mutex
	find := func(kind, name string) (string, bool) {
		mu.Lock()
		id, ok := created[kind+"\x00"+name]
		mu.Unlock()
		if ok {
			return id, true
		}
		if rs := have[kind][name]; len(rs) == 1 {
			return str(rs[0]["id"]), true
		}
		return "", false
	}
	failed := 0
	for phase := 0; phase <= 1; phase++ {
		var batch []*step
		for _, st := range steps {
			if st.kind.phase == phase {
				batch = append(batch, st)
			}
		}
		parallel(opt.Workers, batch, func(st *step) {
			if phase > 0 && st.op != "unchanged" {
				// Plan again with the ids of what phase 0 created.
				re, fe := plan(st.doc, have, find)
				if fe != nil {
					st.err = errors.New(fe.Field + ": " + fe.Message)
					return
				}
				st.op, st.fields = re.op, re.fields
			}
			id, err := write(ctx, c, st, find)
			st.err = err
			if err == nil && st.op == "create" {
				mu.Lock()
				created[st.kind.name+"\x00"+st.name] = id
				mu.Unlock()
			}
		})
		for _, st := range batch {
			report(st)
			if st.err != nil {
				failed++
			}
		}
		if failed > 0 {
			return sum, fmt.Errorf("%d of the writes failed; the rest of the apply was not attempted", failed)
		}
	}
	for phase := 1; phase >= 0; phase-- {
		var batch []*step
		for _, st := range prune {
			if st.kind.phase == phase {
				batch = append(batch, st)
			}
		}
		parallel(opt.Workers, batch, func(st *step) {
			_, st.err = do(ctx, st.kind.deleteCall(ctx, c, str(st.have["id"])))
		})
		for _, st := range batch {
			report(st)
			if st.err != nil {
				failed++
			}
		}
	}
	if failed > 0 {
		return sum, fmt.Errorf("%d of the deletions failed", failed)
	}
	return sum, nil
}

// plan compares one document with the tenant's resource of its name.
func plan(d *Document, have tenant, find lookup) (*step, *FieldError) {
	k := kindOf(d.Kind)
	st := &step{kind: k, name: d.Name, doc: d}
	rs := have[k.name][d.Name]
	if len(rs) > 1 {
		return nil, &FieldError{Field: "name", Message: fmt.Sprintf("the tenant has %d %ss of this name: rename them apart first", len(rs), strings.ToLower(k.name))}
	}
	want, fe := desired(d, find)
	if fe != nil {
		return nil, fe
	}
	if len(rs) == 0 {
		st.op = "create"
		return st, nil
	}
	st.have = rs[0]
	want = managed(k, want, st.have)
	st.fields = diffRecord(want, st.have, deref(schemas()[k.create]))
	st.op = "unchanged"
	if len(st.fields) > 0 {
		st.op = "update"
	}
	return st, nil
}

// desired is a document's body in the API's terms, without the secret
// (which is sent on create only, and never compared).
func desired(d *Document, find lookup) (map[string]any, *FieldError) {
	k := kindOf(d.Kind)
	want, fe := k.toAPI(d.Spec, find)
	if fe != nil {
		fe.Field = join("spec", docField(fe.Field))
		return nil, fe
	}
	want["name"] = d.Name
	delete(want, "secret")
	if k.name == "Calendar" {
		want["dates"] = sortedDates(want["dates"])
	}
	return want, nil
}

// managed adds apply's label to a task's labels: on create, and on an
// update of a task that has it (a task apply did not create does not get
// it, so --prune never deletes it).
func managed(k *kind, want, have resource) resource {
	if k.name != "Task" {
		return want
	}
	if have != nil {
		hl, _ := have["labels"].(map[string]any)
		if hl[ManagedLabel] != managedValue {
			return want
		}
	}
	labels := map[string]any{}
	if wl, ok := want["labels"].(map[string]any); ok {
		for k, v := range wl {
			labels[k] = v
		}
	}
	labels[ManagedLabel] = managedValue
	want["labels"] = labels
	return want
}

// write performs a step and returns the id of what it created.
func write(ctx context.Context, c *client.ClientWithResponses, st *step, find lookup) (string, error) {
	if st.op == "unchanged" {
		return "", nil
	}
	want, fe := desired(st.doc, find)
	if fe != nil {
		return "", errors.New(fe.Field + ": " + fe.Message)
	}
	want = managed(st.kind, want, st.have)
	s := deref(schemas()[st.kind.create])
	if st.op == "update" {
		patch := map[string]any{}
		defs := defaults[schemaName(s)]
		for _, f := range st.fields {
			if v, ok := want[f]; ok {
				patch[f] = v
			} else {
				patch[f] = fill(defs[f], prop(s, f))
			}
		}
		body, err := json.Marshal(patch)
		if err != nil {
			return "", err
		}
		_, err = do(ctx, st.kind.patchCall(ctx, c, str(st.have["id"]), body))
		return "", err
	}
	if secret, ok := st.doc.Spec["secret"]; ok {
		want["secret"] = secret
	}
	body, err := json.Marshal(want)
	if err != nil {
		return "", err
	}
	requestID := requestIDPrefix + rand.Text()
	ed := func(_ context.Context, r *http.Request) error {
		r.Header.Set("X-Request-Id", requestID)
		return nil
	}
	key := idempotencyKey(st.kind, st.name, body)
	for fresh := false; ; fresh = true {
		id, replayed, err := create(ctx, c, st.kind, key, body, ed)
		if err != nil || !replayed {
			return id, err
		}
		// A replay of an earlier create (within the key's 24 h) whose
		// resource is gone since (deleted by hand, or pruned, and now back
		// in the files): create it anew, under a key of its own.
		_, err = do(ctx, st.kind.getCall(ctx, c, id))
		var pe *client.ProblemError
		if fresh || !errors.As(err, &pe) || pe.Status != http.StatusNotFound {
			return id, err
		}
		key = requestIDPrefix + rand.Text()
	}
}

// create sends a create and reports whether the server answered with a
// replay of an earlier one. A create whose answer was lost (the
// connection broke) is sent again with the same Idempotency-Key: the
// server answers with what the first one created instead of creating it
// twice.
func create(ctx context.Context, c *client.ClientWithResponses, k *kind, key string, body []byte, ed client.RequestEditorFn) (string, bool, error) {
	replayed := false
	send := k.createCall(ctx, c, key, body, ed)
	call := func() (*http.Response, []byte, error) {
		res, b, err := send()
		if res != nil {
			replayed = res.Header.Get("Idempotent-Replayed") == "true"
		}
		return res, b, err
	}
	for attempt := 1; ; attempt++ {
		res, err := do(ctx, call)
		var pe *client.ProblemError
		if err != nil && !errors.As(err, &pe) && ctx.Err() == nil && attempt < createAttempts {
			continue
		}
		if err != nil {
			return "", false, err
		}
		return str(res["id"]), replayed, nil
	}
}

// diffLines show an update's fields as the documents spell them: the
// server's value, then the document's (a header's value is never shown:
// it may be a credential).
func diffLines(st *step, have tenant) []string {
	names := map[string]string{}
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
		if id == placeholderID {
			return "(created by this apply)"
		}
		return id
	}
	s := deref(schemas()[st.kind.create])
	var lines []string
	for _, f := range st.fields {
		before := refsToDoc(map[string]any{f: exportValue(st.have[f], prop(s, f))}, s, nameOf)
		field := docField(f)
		var after any = "(the default)"
		if v, ok := st.doc.Spec[field]; ok {
			after = v
		}
		if f == "labels" && st.kind.name == "Task" {
			if l, ok := before[field].(map[string]any); ok {
				l = maps.Clone(l)
				delete(l, ManagedLabel)
				before[field] = l
			}
		}
		lines = append(lines, fmt.Sprintf("  %s: %s -> %s", field, compact(redact(f, before[field])), compact(redact(f, after))))
	}
	return lines
}

func redact(field string, v any) any {
	m, ok := v.(map[string]any)
	if field != "headers" || !ok {
		return v
	}
	out := make(map[string]any, len(m))
	for k := range m {
		out[k] = "…"
	}
	return out
}

func compact(v any) string {
	if v == nil {
		return "(none)"
	}
	if s, ok := v.(string); ok && s == "(the default)" {
		return s
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

// createAttempts bounds the sends of one create whose answers are lost.
const createAttempts = 3

// idempotencyKey is derived from what is created: a re-run after a crash
// (the create done, its answer lost) replays the first answer instead of
// creating again, and a changed document is a new create.
func idempotencyKey(k *kind, name string, body []byte) string {
	h := sha256.New()
	h.Write([]byte(k.name + "\x00" + name + "\x00"))
	h.Write(body)
	return requestIDPrefix + hex.EncodeToString(h.Sum(nil))[:48]
}

// pruneSteps lists the resources --prune deletes: those apply created
// (a task's label; for the other kinds, the audit log's create records
// made with apply's request ids) that no document holds.
func pruneSteps(ctx context.Context, c *client.ClientWithResponses, have tenant, inFiles map[string]bool) ([]*step, error) {
	var out []*step
	// In the order of the deletions: what refers to others first.
	for _, k := range slices.Backward(kinds) {
		var candidates []resource
		for _, name := range sortedKeys(have[k.name]) {
			if inFiles[k.name+"\x00"+name] {
				continue
			}
			candidates = append(candidates, have[k.name][name]...)
		}
		if len(candidates) == 0 {
			continue
		}
		var ours map[string]bool
		if k.name != "Task" {
			var err error
			if ours, err = createdByApply(ctx, c, k); err != nil {
				return nil, err
			}
		}
		for _, r := range candidates {
			labels, _ := r["labels"].(map[string]any)
			if labels[ManagedLabel] == managedValue || ours[str(r["id"])] {
				out = append(out, &step{kind: k, name: str(r["name"]), have: r, op: "delete"})
			}
		}
	}
	return out, nil
}

// createdByApply are the ids of the resources of kind k whose create the
// audit log records with one of apply's request ids (records are kept
// AX_AUDIT_RETENTION, 90 days by default: an older resource is kept).
func createdByApply(ctx context.Context, c *client.ClientWithResponses, k *kind) (map[string]bool, error) {
	ids := map[string]bool{}
	var cursor *string
	limit := 500
	for {
		res, err := do(ctx, func() (*http.Response, []byte, error) {
			r, err := c.ListAuditWithResponse(ctx, &client.ListAuditParams{ResourceType: &k.resource, Limit: &limit, Cursor: cursor})
			return raw(r, err)
		})
		var pe *client.ProblemError
		if errors.As(err, &pe) && pe.Status == http.StatusForbidden {
			return nil, fmt.Errorf("--prune reads the audit log to know which %ss apply created: the token needs the audit:read scope (%w)", strings.ToLower(k.name), err)
		}
		if err != nil {
			return nil, err
		}
		items, _ := res["items"].([]any)
		for _, it := range items {
			e, _ := it.(map[string]any)
			if e["action"] == "create" && strings.HasPrefix(str(e["request_id"]), requestIDPrefix) {
				ids[str(e["resource_id"])] = true
			}
		}
		next := str(res["next_cursor"])
		if next == "" {
			return ids, nil
		}
		cursor = &next
	}
}

// fetch lists every resource of the tenant, by kind and name.
func fetch(ctx context.Context, c *client.ClientWithResponses) (tenant, error) {
	out := tenant{}
	var mu sync.Mutex
	errs := make([]error, len(kinds))
	var wg sync.WaitGroup
	for i, k := range kinds {
		wg.Go(func() {
			items, err := listAll(ctx, c, k)
			byName := map[string][]resource{}
			for _, r := range items {
				byName[str(r["name"])] = append(byName[str(r["name"])], r)
			}
			mu.Lock()
			out[k.name] = byName
			mu.Unlock()
			errs[i] = err
		})
	}
	wg.Wait()
	return out, errors.Join(errs...)
}

func listAll(ctx context.Context, c *client.ClientWithResponses, k *kind) ([]resource, error) {
	var out []resource
	var cursor *string
	for {
		page, err := do(ctx, k.list(ctx, c, cursor))
		if err != nil {
			return nil, fmt.Errorf("list %ss: %w", strings.ToLower(k.name), err)
		}
		items, _ := page["items"].([]any)
		for _, it := range items {
			if r, ok := it.(map[string]any); ok {
				out = append(out, r)
			}
		}
		next := str(page["next_cursor"])
		if next == "" {
			return out, nil
		}
		cursor = &next
	}
}

// do makes an API call, again after a 429 or 503 once Retry-After has
// passed, and returns its JSON answer or its problem as a
// *client.ProblemError.
func do(ctx context.Context, f call) (map[string]any, error) {
	for attempt := 1; ; attempt++ {
		res, body, err := f() //nolint:bodyclose // the generated client has read and closed it
		if err != nil {
			return nil, err
		}
		err = client.Check(res, body)
		var pe *client.ProblemError
		if errors.As(err, &pe) && (pe.Status == http.StatusTooManyRequests || pe.Status == http.StatusServiceUnavailable) && attempt < 10 {
			wait := pe.RetryAfter
			if wait <= 0 {
				wait = time.Second
			}
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-time.After(wait):
			}
			continue
		}
		if err != nil {
			return nil, err
		}
		if len(body) == 0 {
			return nil, nil
		}
		v, err := decodeJSON(body)
		if err != nil {
			return nil, fmt.Errorf("the API's answer: %w", err)
		}
		m, _ := v.(map[string]any)
		return m, nil
	}
}

// parallel runs f on every step, n at a time.
func parallel(n int, steps []*step, f func(*step)) {
	sem := make(chan struct{}, n)
	var wg sync.WaitGroup
	for _, st := range steps {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			f(st)
		})
	}
	wg.Wait()
}

func sortedDates(v any) any {
	dates, ok := v.([]any)
	if !ok {
		return v
	}
	var out []any
	seen := map[string]bool{}
	for _, d := range dates {
		s, _ := d.(string)
		if !seen[s] {
			seen[s] = true
			out = append(out, d)
		}
	}
	slices.SortFunc(out, func(a, b any) int { return strings.Compare(str(a), str(b)) })
	return out
}

func str(v any) string {
	s, _ := v.(string)
	return s
}

func itoa(i int) string { return strconv.Itoa(i) }

func quote(s string) string { return strconv.Quote(s) }
