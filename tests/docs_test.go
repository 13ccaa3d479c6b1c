package tests

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/axhq/ax/jobs"
	webhook "github.com/axhq/ax/openapi/receiver"
	"github.com/axhq/ax/service"
	"github.com/axhq/ax/service/idempotency"
	"github.com/axhq/ax/service/retention"
)

// The documentation's own checks: README.md and docs/*.md link to pages
// and headings that exist, and docs/architecture.md names code that
// exists and quotes the figures the code has. None of them compares text
// with text: each reads the docs for what they claim and asks the code.

// repoRoot is the module's root, one up from this package.
const repoRoot = ".."

// docPages returns README.md and every page under docs/, by path relative
// to the repository.
func docPages(t *testing.T) []string {
	t.Helper()
	pages := []string{"README.md"}
	found, err := filepath.Glob(filepath.Join(repoRoot, "docs", "*.md"))
	require.NoError(t, err)
	require.NotEmpty(t, found)
	for _, p := range found {
		rel, err := filepath.Rel(repoRoot, p)
		require.NoError(t, err)
		pages = append(pages, rel)
	}
	return pages
}

// exists reports whether the repository has a file or directory at rel.
func exists(rel string) bool {
	_, err := os.Stat(filepath.Join(repoRoot, rel))
	return err == nil
}

func readDoc(t *testing.T, rel string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot, rel))
	require.NoError(t, err)
	return string(b)
}

// prose returns a markdown text with its fenced code blocks blanked (the
// line numbers stay): what a reader sees as text, where links and
// headings live.
func prose(md string) []string {
	lines := strings.Split(md, "\n")
	fenced := false
	for i, line := range lines {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			lines[i] = ""
			continue
		}
		if fenced {
			lines[i] = ""
		}
	}
	return lines
}

var (
	inlineCode = regexp.MustCompile("`[^`]*`")
	mdLink     = regexp.MustCompile(`!?\[[^\]]*\]\(([^)\s]+)\)`)
	heading    = regexp.MustCompile(`^#{1,6}\s+(.+?)\s*#*\s*$`)
)

// anchors returns the anchors GitHub makes for a page's headings: lower
// case, punctuation but '-' and '_' dropped, spaces as '-', and a repeated
// heading numbered ("-1", "-2", …).
func anchors(md string) map[string]bool {
	out := make(map[string]bool)
	seen := make(map[string]int)
	for _, l := range prose(md) {
		m := heading.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		text := mdLink.ReplaceAllStringFunc(m[1], func(s string) string { // a link's text only
			return s[strings.IndexByte(s, '[')+1 : strings.LastIndex(s, "](")]
		})
		var b strings.Builder
		for _, r := range strings.ToLower(text) {
			switch {
			case unicode.IsLetter(r) || unicode.IsDigit(r) || r == '-' || r == '_':
				b.WriteRune(r)
			case r == ' ':
				b.WriteByte('-')
			}
		}
		slug := b.String()
		if n := seen[slug]; n > 0 {
			out[slug+"-"+strconv.Itoa(n)] = true
		} else {
			out[slug] = true
		}
		seen[slug]++
	}
	return out
}

// TestDocsLinksResolve: every relative link in README.md and docs/*.md
// names a file that exists and, with a #fragment into a markdown page, a
// heading of that page. It fails when a section moves or is renamed and a
// page still points at its old place.
func TestDocsLinksResolve(t *testing.T) {
	t.Parallel()
	pageAnchors := make(map[string]map[string]bool)
	anchorsOf := func(rel string) map[string]bool {
		if a, ok := pageAnchors[rel]; ok {
			return a
		}
		a := anchors(readDoc(t, rel))
		pageAnchors[rel] = a
		return a
	}
	checked := 0
	for _, page := range docPages(t) {
		// Inline code is blanked, not removed, so that offsets stay lines;
		// a link's text may run over a line break.
		text := inlineCode.ReplaceAllStringFunc(strings.Join(prose(readDoc(t, page)), "\n"), func(s string) string {
			return strings.Repeat(" ", len(s))
		})
		for _, m := range mdLink.FindAllStringSubmatchIndex(text, -1) {
			target := text[m[2]:m[3]]
			line := 1 + strings.Count(text[:m[0]], "\n")
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			checked++
			path, frag, _ := strings.Cut(target, "#")
			rel := page
			if path != "" {
				rel = filepath.Clean(filepath.Join(filepath.Dir(page), path))
				assert.Truef(t, exists(rel), "%s:%d links to %s, which does not exist", page, line, target)
			}
			if frag != "" && strings.HasSuffix(rel, ".md") {
				assert.Truef(t, anchorsOf(rel)[frag], "%s:%d links to %s: %s has no heading #%s",
					page, line, target, rel, frag)
			}
		}
	}
	require.Greater(t, checked, 50, "found the pages' links")
}

// declared is every name the module's Go code declares: per package
// directory (relative to the root, e.g. "service", "db/pglocal"), its
// top-level names and its types' methods and fields as "Type.Name"; and
// the union of them all.
type declared struct {
	byDir map[string]map[string]bool
	all   map[string]bool
}

func declaredNames(t *testing.T) declared {
	t.Helper()
	d := declared{byDir: make(map[string]map[string]bool), all: make(map[string]bool)}
	fset := token.NewFileSet()
	err := filepath.WalkDir(repoRoot, func(path string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if e.IsDir() && (e.Name() == "node_modules" || e.Name() == "testdata" || strings.HasPrefix(e.Name(), ".") && path != repoRoot) {
			return filepath.SkipDir
		}
		if e.IsDir() || !strings.HasSuffix(path, ".go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(repoRoot, filepath.Dir(path))
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		names := d.byDir[rel]
		if names == nil {
			names = make(map[string]bool)
			d.byDir[rel] = names
		}
		add := func(name string) {
			names[name] = true
			d.all[name] = true
		}
		for _, decl := range f.Decls {
			switch decl := decl.(type) {
			case *ast.FuncDecl:
				if decl.Recv == nil || len(decl.Recv.List) == 0 {
					add(decl.Name.Name)
					continue
				}
				add(receiverType(decl.Recv.List[0].Type) + "." + decl.Name.Name)
				add(decl.Name.Name)
			case *ast.GenDecl:
				for _, spec := range decl.Specs {
					switch spec := spec.(type) {
					case *ast.TypeSpec:
						add(spec.Name.Name)
						if st, ok := spec.Type.(*ast.StructType); ok {
							for _, field := range st.Fields.List {
								for _, n := range field.Names {
									add(spec.Name.Name + "." + n.Name)
									add(n.Name)
								}
								if len(field.Names) == 0 { // embedded: named by its type
									add(spec.Name.Name + "." + receiverType(field.Type))
								}
							}
						}
					case *ast.ValueSpec:
						for _, n := range spec.Names {
							add(n.Name)
						}
					}
				}
			}
		}
		return nil
	})
	require.NoError(t, err)
	return d
}

// receiverType names the type of a method's receiver or an embedded
// field: T, *T, T[P] and pkg.T all give T.
func receiverType(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.StarExpr:
		return receiverType(e.X)
	case *ast.IndexExpr:
		return receiverType(e.X)
	case *ast.IndexListExpr:
		return receiverType(e.X)
	case *ast.SelectorExpr:
		return e.Sel.Name
	case *ast.Ident:
		return e.Name
	}
	return ""
}

// goPackages maps the package names docs/architecture.md qualifies names
// with to their directories.
var goPackages = map[string]string{
	"api": "api", "console": "api/console", "db": "db", "dbtest": "db/dbtest", "pglocal": "db/pglocal",
	"jobs": "jobs", "service": "service", "receiver": "openapi/receiver", "pgstore": "openapi/receiver/pgstore",
	"client": "openapi/client", "errs": "service/errs", "resource": "service/resource", "audit": "service/audit", "retention": "service/retention",
	"replica": "service/replica", "idempotency": "service/idempotency",
	"dbclock": "service/dbclock", "signing": "service/signing", "batch": "service/batch", "lane": "service/lane",
	"endpoint": "service/endpoint", "calendar": "service/calendar", "limits": "service/limits", "job": "service/job", "stats": "service/stats", "alert": "service/alert",
	"queue": "service/queue", "payload": "service/payload", "backfill": "service/backfill", "bulk": "service/bulk", "reconcile": "service/reconcile", "sla": "service/sla",
}

// notOurs are names architecture.md quotes that ax does not declare:
// River's, Postgres's, the standard library's and other tools'.
var notOurs = map[string]bool{
	"river.Config.ID":      true, // River's client ID
	"NextRetry":            true, // River's worker hook, implemented by ax's workers
	"MaxAttempts":          true, // River's job field
	"JobSetStateIfRunning": true, // River's query
	"HttpOnly":             true, // cookie attributes
	"SameSite":             true,
	"Max-Age":              true,
	"Origin":               true, // an HTTP header
	"allowEmptyValue":      true, // an OpenAPI keyword
	"NamePatch":            true, // the pattern of the PATCH schemas' names (TaskRequestPatch)
	"tests/screenshots/":   true, // written by the browser tests, ignored by git
}

var (
	backticked = regexp.MustCompile("`([^`\n]+)`")
	goName     = regexp.MustCompile(`^([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*)(?:\(.*)?$`)
	sourceFile = regexp.MustCompile(`^[\w./-]+\.(?:go|sql|html|js|css|json|yaml)$`)
	repoPath   = regexp.MustCompile(`^(?:api|cmd|db|deploy|docs|jobs|openapi|service|tests)/[\w./-]*$`)
	migration  = regexp.MustCompile(`\bmigrations? (\d{4})\b`)
	indexName  = regexp.MustCompile(`^[a-z0-9_]+_idx$`)
	allCaps    = regexp.MustCompile(`^[A-Z0-9_]+$`)
)

// TestArchitectureNamesExist: the functions, types, methods, fields,
// files, migrations and indexes docs/architecture.md names in code spans
// exist. It fails when code it describes is renamed or removed and the
// page is not brought along.
func TestArchitectureNamesExist(t *testing.T) {
	t.Parallel()
	names := declaredNames(t)
	// One paragraph a line: a code span may run over a line break.
	doc := strings.Join(paragraphs(readDoc(t, "docs/architecture.md")), "\n")
	var sql strings.Builder
	migrations, err := filepath.Glob(filepath.Join(repoRoot, "db", "migrations", "*.sql"))
	require.NoError(t, err)
	require.NotEmpty(t, migrations)
	for _, m := range migrations {
		sql.WriteString(readDoc(t, filepath.Join("db", "migrations", filepath.Base(m))))
	}
	basenames := make(map[string]bool)
	require.NoError(t, filepath.WalkDir(repoRoot, func(path string, e fs.DirEntry, err error) error {
		if err == nil && !e.IsDir() {
			basenames[e.Name()] = true
		}
		return err
	}))

	checked := 0
	for _, m := range backticked.FindAllStringSubmatch(doc, -1) {
		span := strings.TrimSpace(m[1])
		if notOurs[span] {
			continue
		}
		switch {
		case sourceFile.MatchString(span) && !strings.Contains(span, "/"):
			checked++
			assert.Truef(t, basenames[span], "architecture.md names the file %s: none has that name", span)
		case repoPath.MatchString(span):
			checked++
			assert.Truef(t, exists(span), "architecture.md names %s, which does not exist", span)
		case indexName.MatchString(span):
			checked++
			assert.Containsf(t, sql.String(), span, "architecture.md names the index %s: no migration creates it", span)
		default:
			nm := goName.FindStringSubmatch(span)
			if nm == nil {
				continue
			}
			if ok, what := names.has(nm[1]); what != "" {
				checked++
				assert.Truef(t, ok, "architecture.md names %s (%s): the code declares no such thing", span, what)
			}
		}
	}
	for _, m := range migration.FindAllStringSubmatch(doc, -1) {
		checked++
		found, err := filepath.Glob(filepath.Join(repoRoot, "db", "migrations", m[1]+"_*.sql"))
		require.NoError(t, err)
		assert.Lenf(t, found, 1, "architecture.md names migration %s: there is no such file", m[1])
	}
	require.Greater(t, checked, 200, "found the page's names")
}

// has reports whether name, as architecture.md writes it, is declared,
// and what kind of name it was taken for ("" when it is not a Go name:
// a column, a state, an SQL word, a variable of the environment).
func (d declared) has(name string) (bool, string) {
	parts := strings.Split(name, ".")
	if dir, ok := goPackages[parts[0]]; ok && len(parts) > 1 {
		return d.byDir[dir][strings.Join(parts[1:], ".")], "in package " + parts[0]
	}
	if len(parts) > 1 {
		// Type.Member; a lower-case first part that is not a package is a
		// table and its column (tasks.shards) or a JSON path.
		if strings.ToLower(parts[0]) == parts[0] {
			return false, ""
		}
		return d.all[parts[0]+"."+parts[1]], "a type's method or field"
	}
	if allCaps.MatchString(name) || strings.ToLower(name) == name {
		return false, ""
	}
	return d.all[name], "a declaration"
}

// paragraphs splits a markdown text's prose into paragraphs and list
// items, each on one line with its spaces collapsed, so that a phrase
// found in one does not depend on where the lines break.
func paragraphs(md string) []string {
	var out []string
	var cur []string
	flush := func() {
		if len(cur) > 0 {
			out = append(out, strings.Join(strings.Fields(strings.Join(cur, " ")), " "))
			cur = nil
		}
	}
	for _, l := range prose(md) {
		trimmed := strings.TrimSpace(l)
		switch {
		case trimmed == "":
			flush()
		case strings.HasPrefix(trimmed, "- ") || strings.HasPrefix(trimmed, "|") || heading.MatchString(l):
			flush()
			cur = append(cur, trimmed)
		default:
			cur = append(cur, trimmed)
		}
	}
	flush()
	return out
}

// spell returns the ways the docs write a duration or a count.
func spell(v any) []string {
	switch v := v.(type) {
	case time.Duration:
		var out []string
		switch {
		case v < time.Second:
			out = append(out, fmt.Sprintf("%d ms", v.Milliseconds()))
		case v%time.Hour == 0:
			out = append(out, fmt.Sprintf("%d h", int(v.Hours())), fmt.Sprintf("%d hours", int(v.Hours())))
		case v%time.Minute == 0:
			out = append(out, fmt.Sprintf("%d min", int(v.Minutes())), fmt.Sprintf("%d minutes", int(v.Minutes())))
		case v%time.Second == 0:
			out = append(out, fmt.Sprintf("%d s", int(v.Seconds())), fmt.Sprintf("%d seconds", int(v.Seconds())))
		default:
			out = append(out, v.String())
		}
		switch v {
		case time.Second:
			out = append(out, "every second", "a second")
		case time.Minute:
			out = append(out, "once a minute", "a minute")
		}
		return out
	case int:
		words := []string{"zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten"}
		out := []string{strconv.Itoa(v), thousands(v)}
		if v >= 0 && v < len(words) {
			out = append(out, words[v])
		}
		return out
	}
	panic(fmt.Sprintf("spell %T", v))
}

// thousands writes n with a comma every three digits, as the docs do.
func thousands(n int) string {
	s := strconv.Itoa(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// TestArchitectureFigures: the defaults and sizes docs/architecture.md
// quotes are the code's. Each figure is looked for in the paragraphs that
// name what it measures (the anchor), however the sentence is worded; a
// change of the constant, or a page that drops the figure or its anchor,
// fails here with the code's value to write.
func TestArchitectureFigures(t *testing.T) {
	t.Parallel()
	paras := paragraphs(readDoc(t, "docs/architecture.md"))
	river := jobs.RiverConfig{}.WithDefaults()
	figures := []struct {
		anchor string
		value  any
	}{
		{"`FetchAhead`", river.FetchAhead()},
		{"`BulkFetchAhead`", river.BulkFetchAhead()},
		{"`BulkFetchAhead`", jobs.BulkFetchPollIntervalDefault},
		{"`BulkFetchAhead`", jobs.FetchPollIntervalDefault},
		{"`service.Scheduler.Tick` claims up to", service.BatchSizeDefault},
		{"the look-ahead", service.LookAheadDefault},
		{"`fire_all` within", service.MisfireThresholdDefault},
		{"`fire_all` within", service.CatchUpWindowDefault},
		{"`fire_all` within", service.CatchUpMaxDefault},
		{"LISTEN ax_task_changed", service.TaskWakeWithin},
		{"`service.DeliverBatchWorkers`", jobs.DeliverWorkersDefault},
		{"`service.DeliverBatchWorkers`", service.DeliverBatchWorkers(jobs.DeliverWorkersDefault)},
		{"**Crash**", service.ReplicaDeadAfterDefault},
		{"**Crash**", jobs.RescueStuckJobsAfterDefault},
		{"`Scheduler.Reconcile`", service.ReconcileAfterDefault},
		{"**callback sweeper**", jobs.CallbackEveryDefault},
		{"`jobs.RetentionLoop`", jobs.RetentionEveryDefault},
		{"`jobs.RetentionLoop`", retention.BudgetDefault},
		{"older than `AX_AUDIT_RETENTION`", retention.BatchDefault},
		{"The `heartbeat` loop (`jobs.Replica`) heartbeats", jobs.HeartbeatInterval(0)},
		{"A duplicate waits on the key's unique index", idempotency.Wait},
		{"`idempotency_keys`", idempotency.TTL},
		{"**Backfills** store their slot list", service.BackfillSlotsMax},
		{"The pump runs", jobs.BackfillPollDefault},
		{"The `workflow_sweep` loop", jobs.WorkflowSweepDefault},
		{"`DefaultLease`", webhook.DefaultLease},
		{"`TestPostgresCrash`", len(crashOutages)},
		{"**Shards.** `tasks.shards`", service.ShardsMax},
	}
	for _, f := range figures {
		var near []string
		for _, p := range paras {
			if strings.Contains(p, f.anchor) {
				near = append(near, p)
			}
		}
		want := spell(f.value)
		if !assert.NotEmptyf(t, near, "architecture.md no longer has a paragraph naming %s, which quoted %s", f.anchor, want[0]) {
			continue
		}
		found := false
		for _, p := range near {
			for _, w := range want {
				found = found || strings.Contains(p, w)
			}
		}
		assert.Truef(t, found, "architecture.md, where it names %s, should quote the code's %s:\n%s",
			f.anchor, want[0], strings.Join(near, "\n"))
	}
}

// migrationSchema is what the migrations leave: the tables they create
// and the unique keys in force (a table's UNIQUE and PRIMARY KEY, and
// each unique index as its last CREATE left it), as "(cols) WHERE cond".
type migrationSchema struct {
	tables map[string]bool
	keys   map[string]bool
}

var (
	sqlComment  = regexp.MustCompile(`--[^\n]*`)
	createTable = regexp.MustCompile(`(?is)CREATE TABLE (?:IF NOT EXISTS )?(\w+) \((.*?)\n\);`)
	dropTable   = regexp.MustCompile(`(?i)DROP TABLE (?:IF EXISTS )?(\w+)`)
	tableKey    = regexp.MustCompile(`(?i)(?:UNIQUE|PRIMARY KEY) \(([^)]*)\)`)
	uniqueIndex = regexp.MustCompile(`(?is)CREATE UNIQUE INDEX (\w+) ON \w+ \(([^)]*)\)\s*(?:WHERE ([^;]*))?;`)
	dropIndex   = regexp.MustCompile(`(?i)DROP INDEX (?:IF EXISTS )?(\w+)`)
	statement   = regexp.MustCompile(`(?is)(CREATE TABLE.*?\n\);|CREATE UNIQUE INDEX.*?;|DROP (?:TABLE|INDEX).*?;)`)
	quotedKey   = regexp.MustCompile("`UNIQUE (\\([^)`]*\\)(?: WHERE [^`]*)?)`")
)

func readSchema(t *testing.T) migrationSchema {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(repoRoot, "db", "migrations", "*.sql"))
	require.NoError(t, err)
	require.NotEmpty(t, files)
	tables := make(map[string]bool)
	indexes := make(map[string]string)
	var tableKeys []string
	for _, f := range files { // Glob sorts: the migrations in order
		sql := sqlComment.ReplaceAllString(readDoc(t, filepath.Join("db", "migrations", filepath.Base(f))), "")
		for _, st := range statement.FindAllString(sql, -1) {
			if m := createTable.FindStringSubmatch(st); m != nil {
				tables[m[1]] = true
				for _, k := range tableKey.FindAllStringSubmatch(m[2], -1) {
					tableKeys = append(tableKeys, "("+oneLine(k[1])+")")
				}
			} else if m := dropTable.FindStringSubmatch(st); m != nil {
				delete(tables, m[1])
			} else if m := uniqueIndex.FindStringSubmatch(st); m != nil {
				key := "(" + oneLine(m[2]) + ")"
				if m[3] != "" {
					key += " WHERE " + oneLine(m[3])
				}
				indexes[m[1]] = key
			} else if m := dropIndex.FindStringSubmatch(st); m != nil {
				delete(indexes, m[1])
			}
		}
	}
	s := migrationSchema{tables: tables, keys: make(map[string]bool)}
	for _, k := range tableKeys {
		s.keys[k] = true
	}
	for _, k := range indexes {
		s.keys[k] = true
		if cols, _, ok := strings.Cut(k, " WHERE "); ok {
			s.keys[cols] = true // quoted without its condition
		}
	}
	return s
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// TestDocsSchema: the Data table of docs/architecture.md lists every table
// the migrations create (River's aside), and every unique key the docs
// quote (`UNIQUE (task_id, scheduled_for, …) WHERE …`) is one the schema
// has now. It fails when a migration adds a table or changes a key and the
// docs still describe the old ones.
func TestDocsSchema(t *testing.T) {
	t.Parallel()
	schema := readSchema(t)
	require.Contains(t, schema.tables, "executions", "read the migrations")

	listed := make(map[string]bool)
	inData := false
	for _, p := range paragraphs(readDoc(t, "docs/architecture.md")) {
		if strings.HasPrefix(p, "#") {
			inData = p == "## Data"
			continue
		}
		if inData && strings.HasPrefix(p, "| `") {
			first, _, _ := strings.Cut(strings.TrimPrefix(p, "|"), "|")
			for _, m := range backticked.FindAllStringSubmatch(first, -1) {
				listed[m[1]] = true
			}
		}
	}
	for table := range schema.tables {
		assert.Truef(t, listed[table], "docs/architecture.md's Data table does not list the table %s", table)
	}

	quoted := 0
	for _, page := range docPages(t) {
		for _, p := range paragraphs(readDoc(t, page)) {
			for _, m := range quotedKey.FindAllStringSubmatch(p, -1) {
				quoted++
				assert.Truef(t, schema.keys[oneLine(m[1])], "%s quotes `UNIQUE %s`: the schema has no such unique key; it has %v",
					page, m[1], mapKeys(schema.keys))
			}
		}
	}
	require.Positive(t, quoted, "found the quoted keys")
}

func mapKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
