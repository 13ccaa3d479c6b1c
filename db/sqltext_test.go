package db_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// goFile is one parsed source file with its package's constants.
type goFile struct {
	path string
	file *ast.File
	fset *token.FileSet
}

// parseDir parses the non-test Go files of dir.
func parseDir(t *testing.T, dir string) []goFile {
	t.Helper()
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	fset := token.NewFileSet()
	var out []goFile
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		path := filepath.Join(dir, name)
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		require.NoError(t, err)
		out = append(out, goFile{path: path, file: f, fset: fset})
	}
	return out
}

// constants returns the package-level string constants and variables of
// files, by name. A state fragment (db/lifecycle.go: a variable built by
// stateLit, stateList or stateSet) stands for itself, as ⟨name⟩: it is a
// name, not a literal.
func constants(files []goFile) map[string]ast.Expr {
	out := map[string]ast.Expr{}
	for _, f := range files {
		for _, d := range f.file.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok || (g.Tok != token.CONST && g.Tok != token.VAR) {
				continue
			}
			for _, s := range g.Specs {
				v := s.(*ast.ValueSpec)
				for i, n := range v.Names {
					if i >= len(v.Values) {
						continue
					}
					out[n.Name] = v.Values[i]
					if isFragment(v.Values[i]) {
						out[n.Name] = &ast.BasicLit{Kind: token.STRING, Value: strconv.Quote("⟨" + n.Name + "⟩")}
					}
				}
			}
		}
	}
	return out
}

// fragmentBuilders build the state fragments of db/lifecycle.go.
var fragmentBuilders = []string{"stateLit", "stateList", "stateSet"}

// isFragment reports whether e builds a state fragment.
func isFragment(e ast.Expr) bool {
	call, ok := e.(*ast.CallExpr)
	if !ok {
		return false
	}
	fn, ok := call.Fun.(*ast.Ident)
	return ok && slices.Contains(fragmentBuilders, fn.Name)
}

// stringValue folds a constant string expression (literals, the
// package's constants and + between them); ok is false for anything else.
func stringValue(e ast.Expr, consts map[string]ast.Expr) (string, bool) {
	switch e := e.(type) {
	case *ast.BasicLit:
		if e.Kind != token.STRING {
			return "", false
		}
		s, err := strconv.Unquote(e.Value)
		return s, err == nil
	case *ast.ParenExpr:
		return stringValue(e.X, consts)
	case *ast.Ident:
		if v, ok := consts[e.Name]; ok {
			return stringValue(v, consts)
		}
	case *ast.BinaryExpr:
		if e.Op != token.ADD {
			return "", false
		}
		x, ok := stringValue(e.X, consts)
		if !ok {
			return "", false
		}
		y, ok := stringValue(e.Y, consts)
		return x + y, ok
	}
	return "", false
}

// sqlString is a constant string of a function, folded whole.
type sqlString struct {
	fn, pos, text string
}

// strings returns every maximal constant string expression of files (not
// a part of a longer one), with the function it is in.
func stringsOf(files []goFile) []sqlString {
	consts := constants(files)
	var out []sqlString
	for _, f := range files {
		for _, d := range f.file.Decls {
			fn := "(package level)"
			if fd, ok := d.(*ast.FuncDecl); ok {
				fn = fd.Name.Name
			}
			visit := func(n ast.Node) bool {
				e, ok := n.(ast.Expr)
				if !ok {
					return true
				}
				if s, ok := stringValue(e, consts); ok {
					out = append(out, sqlString{fn: fn, pos: f.fset.Position(e.Pos()).String(), text: s})
					return false // its parts are not strings of their own
				}
				return true
			}
			ast.Inspect(d, visit)
		}
	}
	return out
}

// sqlStatement matches the SQL a Go string may carry to a database.
var sqlStatement = regexp.MustCompile(`\b(SELECT\s.+\sFROM|INSERT\s+INTO|UPDATE\s+\w+(\s+\w+)?\s+SET|DELETE\s+FROM|LISTEN\s|NOTIFY\s|pg_notify|SET\s+LOCAL|set_config|ANALYZE\s)`)

// TestNoSQLOutsideDB: SQL lives in db/ alone. No non-test Go file of the
// product outside db/ holds a string that looks like a SQL statement
// (lint keeps the driver out of those packages; this keeps the text out).
func TestNoSQLOutsideDB(t *testing.T) {
	t.Parallel()
	for _, dir := range withSubdirs(t, "../api", "../service", "../jobs", "../cmd/server") {
		for _, s := range stringsOf(parseDir(t, dir)) {
			require.False(t, sqlStatement.MatchString(strings.Join(strings.Fields(s.text), " ")),
				"%s (%s) holds SQL; move it into a named function of db/: %q", s.pos, s.fn, s.text)
		}
	}
	require.True(t, sqlStatement.MatchString("SELECT 1 FROM tasks"), "the pattern finds SQL")
	require.True(t, sqlStatement.MatchString("UPDATE tasks t SET x = 1"), "the pattern finds SQL")
}

// withSubdirs returns dirs and every directory under them (but testdata).
func withSubdirs(t *testing.T, dirs ...string) []string {
	t.Helper()
	var out []string
	for _, dir := range dirs {
		require.NoError(t, filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
			switch {
			case err != nil:
				return err
			case d.IsDir() && d.Name() == "testdata":
				return filepath.SkipDir
			case d.IsDir():
				out = append(out, path)
			}
			return nil
		}))
	}
	return out
}

// TestOnlyErrorsGoReadsDBErrors: the service translates db's errors in one
// place (service/errs/errs.go, errs.Store); every other file of the service
// and its packages hands them on.
func TestOnlyErrorsGoReadsDBErrors(t *testing.T) {
	t.Parallel()
	var files []goFile
	for _, dir := range withSubdirs(t, "../service") {
		files = append(files, parseDir(t, dir)...)
	}
	for _, f := range files {
		if filepath.ToSlash(f.path) == "../service/errs/errs.go" {
			continue
		}
		ast.Inspect(f.file, func(n ast.Node) bool {
			sel, ok := n.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			if x, ok := sel.X.(*ast.Ident); ok && x.Name == "db" && strings.HasPrefix(sel.Sel.Name, "Err") {
				t.Errorf("%s reads db.%s: translate db's errors with errs.Store (service/errs/errs.go)",
					f.fset.Position(sel.Pos()), sel.Sel.Name)
			}
			return true
		})
	}
}

// tenantTables are the tables whose rows belong to a tenant (a tenant_id
// column).
var tenantTables = []string{
	"endpoints", "tasks", "executions", "execution_events", "unfinished_executions", "idempotency_keys", "audit_log",
	"callback_attempts", "sla_misses", "flow_gates", "flow_permits", "flow_holds", "api_budgets", "workflow_run_events",
	"backfills", "calendars", "workflows", "workflow_versions", "workflow_runs", "workflow_run_nodes", "execution_outputs",
	"posted_events", "event_dedup",
}

// crossTenant lists the functions of db/ whose statements read or write
// tenant tables across tenants, on purpose. Each says why.
var crossTenant = map[string]string{
	// The scheduler claims due tasks of every tenant, by next_run_at
	// (the tasks_due_idx partial index), with SKIP LOCKED.
	"ClaimDueTasks": "the scheduler's claim of every tenant's due tasks",
	// The scheduler loop sleeps until the earliest due task of any tenant.
	"NextDueIn": "the scheduler's look at the earliest due task",
	// The scheduler counts every tenant's tasks due soon (a bounded walk
	// of tasks_due_idx) to claim a large instant early.
	"CountTasksDueBetween": "the scheduler's count of the tasks due soon",
	// Maintenance of unfinished_executions over every tenant; the join to
	// executions is on (tenant_id, id).
	"SweepUnfinished": "maintenance of unfinished_executions",
	// Maintenance: expired keys of every tenant go.
	"DeleteExpiredIdempotencyKeys": "maintenance of idempotency keys",
	// Retention: audit records of every tenant older than the retention
	// go, oldest first (audit_log_at_idx).
	"DeleteExpiredAudit": "retention of the audit log",
	// Retention: events (and expired dedup keys) of every tenant older
	// than the retention go, oldest first (posted_events_received_idx).
	"DeleteExpiredEvents": "retention of events",
	// The reconciler looks for unfinished executions of every tenant that
	// no live job carries; its joins are on (tenant_id, id).
	"FindOrphanedExecutions": "the reconciler's look at every tenant's unfinished executions",
	// A dead replica's River jobs carry executions of any tenant; the
	// join to executions is on (tenant_id, id).
	"ResumeJobsOf": "the events of a dead replica's resumed deliveries",
	// A callback token is the capability: its hash finds its attempt (by
	// the unique token index), whose row names the tenant; the join to
	// executions is on (tenant_id, id).
	"GetCallbacksByTokens": "a callback token names its tenant",
	// The callback sweeper finds every tenant's expired waits by the
	// partial index of expires_at, and sleeps until the earliest.
	"FindExpiredCallbacks": "the callback sweeper's look at every tenant's expired waits",
	"NextCallbackExpiry":   "the callback sweeper's look at the earliest wait",
	// The SLA sweep walks every tenant's tasks with an SLA (tasks_sla_idx)
	// and their unfinished executions; its joins are on tenant_id.
	"FindSLAMisses": "the SLA sweep over every tenant's tasks with an SLA",
	// The limits' dispatcher: which tenants have held deliveries (each is
	// then dispatched on its own), and the sweep of every tenant's expired
	// permits (flow_permits_expires_idx; the gates by (tenant_id, gate)).
	"TenantsWithHolds": "the dispatcher's look for tenants with held deliveries",
	"SweepPermits":     "maintenance of expired permits",
	// The backfill pump takes every tenant's running backfills in turn
	// (each is then pumped by (tenant_id, id)).
	"RunningBackfills": "the backfill pump's look for running backfills",
	// The expiry of wait_for nodes finds every tenant's overdue waits by
	// the partial index of their deadlines (each run is then locked and
	// expired by (tenant_id, id)); the gauge counts every tenant's waits.
	"OverdueWaitRuns":   "the expiry's look at every tenant's overdue waits",
	"CountWaitingNodes": "the ax_waiting_nodes gauge",
	// The sweep counts every tenant's waits started or ended into their
	// runs (the nodes by a partial index, then each run by (tenant_id,
	// id)).
	"CountRunWaits": "the sweep's count of every tenant's waits into their runs",
}

// reference matches a table reference: the keyword before it, the table
// and an alias when there is one.
var reference = regexp.MustCompile(`(?i)\b(FROM|JOIN|UPDATE|INTO|USING)\s+(` + strings.Join(tenantTables, "|") +
	`)\b(?:\s+(?:AS\s+)?([a-z_][a-z0-9_]*))?`)

// notAlias are words that may follow a table name and are no alias.
var notAlias = []string{
	"where", "set", "on", "left", "right", "inner", "cross", "join", "order", "group", "limit",
	"using", "for", "as", "values", "select", "returning", "offset", "with", "and", "or", "natural", "full",
}

// missingTenantConditions returns a description of each reference to a
// tenant table in sql that no tenant_id condition scopes: a SELECT,
// UPDATE or DELETE needs `alias.tenant_id =` (or `= alias.tenant_id`, or an
// unqualified `tenant_id =` for an unaliased table), an INSERT a tenant_id
// column.
func missingTenantConditions(sql string) []string {
	var out []string
	for _, m := range reference.FindAllStringSubmatchIndex(sql, -1) {
		keyword, table := strings.ToUpper(sql[m[2]:m[3]]), sql[m[4]:m[5]]
		if keyword == "INTO" {
			cols := regexp.MustCompile(`(?i)^\s*\(([^)]*)\)`).FindStringSubmatch(sql[m[5]:])
			if cols == nil || !regexp.MustCompile(`\btenant_id\b`).MatchString(cols[1]) {
				out = append(out, "INSERT INTO "+table+" without a tenant_id column")
			}
			continue
		}
		alias := ""
		if m[6] >= 0 {
			alias = strings.ToLower(sql[m[6]:m[7]])
		}
		if slices.Contains(notAlias, alias) {
			alias = ""
		}
		name := alias
		if name == "" {
			name = table
		}
		q := regexp.QuoteMeta(name)
		scoped := regexp.MustCompile(`\b` + q + `\.tenant_id\s*=|=\s*` + q + `\.tenant_id\b`).MatchString(sql)
		if !scoped && alias == "" {
			scoped = regexp.MustCompile(`(^|[^.\w])tenant_id\s*=`).MatchString(sql)
		}
		if !scoped {
			out = append(out, keyword+" "+table+" "+alias+" without a tenant_id condition")
		}
	}
	return out
}

// TestTenantScopedQueries: every statement of db/ that touches a tenant
// table is scoped by tenant_id, but those of crossTenant. Tenancy is in the
// schema (composite keys), and in every query.
func TestTenantScopedQueries(t *testing.T) {
	t.Parallel()
	checked := 0
	for _, s := range stringsOf(parseDir(t, ".")) {
		text := strings.Join(strings.Fields(s.text), " ")
		if !regexp.MustCompile(`(?i)^\s*(SELECT|WITH|INSERT|UPDATE|DELETE)\b`).MatchString(text) {
			continue
		}
		if _, ok := crossTenant[s.fn]; ok {
			continue
		}
		checked++
		for _, miss := range missingTenantConditions(text) {
			t.Errorf("%s (%s): %s: %q", s.pos, s.fn, miss, text)
		}
	}
	require.Greater(t, checked, 40, "the test found the statements of db/")
}

// TestTenantCheckFindsMissingConditions: the check itself, on statements
// stripped of their tenant condition.
func TestTenantCheckFindsMissingConditions(t *testing.T) {
	t.Parallel()
	ok := []string{
		`SELECT * FROM tasks WHERE tenant_id = $1 AND id = $2`,
		`SELECT e.id FROM executions e JOIN tasks t ON t.tenant_id = e.tenant_id AND t.id = e.task_id WHERE e.tenant_id = $1`,
		`UPDATE executions e SET state = 'x' FROM input i WHERE e.tenant_id = i.tenant_id AND e.id = i.id`,
		`INSERT INTO execution_events (tenant_id, execution_id, type) VALUES ($1, $2, $3)`,
		`DELETE FROM unfinished_executions u USING c WHERE u.tenant_id = c.tenant_id AND u.id = c.id`,
	}
	for _, sql := range ok {
		require.Empty(t, missingTenantConditions(sql), sql)
	}
	bad := []string{
		`SELECT * FROM tasks WHERE id = $2`,
		`SELECT e.id FROM executions e JOIN tasks t ON t.id = e.task_id WHERE e.tenant_id = $1`,
		`UPDATE executions e SET state = 'x' FROM input i WHERE e.id = i.id`,
		`INSERT INTO execution_events (execution_id, type) VALUES ($2, $3)`,
		`DELETE FROM endpoints WHERE id = $2`,
		`SELECT t.id FROM tasks t WHERE x.tenant_id = $1`,
	}
	for _, sql := range bad {
		require.NotEmpty(t, missingTenantConditions(sql), sql)
	}
}
