package db_test

import (
	"context"
	"go/ast"
	"go/token"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/riverqueue/river/rivertype"
	"github.com/stretchr/testify/require"

	"github.com/axhq/ax/db"
	"github.com/axhq/ax/db/dbtest"
	"github.com/axhq/ax/service/lifecycle"
)

// stateWords are every state a statement of db/ may name: ax's own
// (service/lifecycle), River's and the replicas'.
func stateWords() []string {
	var out []string
	for _, s := range []lifecycle.Set{
		lifecycle.Executions.States(), lifecycle.Runs.States(), lifecycle.Nodes.States(),
		lifecycle.TaskStates, lifecycle.WorkflowStates, lifecycle.BackfillStates,
	} {
		out = append(out, s.States()...)
	}
	for _, s := range rivertype.JobStates() {
		out = append(out, string(s))
	}
	return append(out, db.ReplicaAlive, db.ReplicaDead, db.ReplicaGone)
}

var (
	// literalList is a parenthesized list of SQL string literals, an
	// ARRAY[…] of them, or an array literal '{…}'.
	literalList = regexp.MustCompile(`\(\s*'[^']*'(?:\s*,\s*'[^']*')*\s*\)|(?i:ARRAY)\s*\[\s*'[^']*'(?:\s*,\s*'[^']*')*\s*\]|'\{[^'}]*\}'`)
	quoted      = regexp.MustCompile(`'([^']*)'`)
	// comparison is an operand compared with a SQL string literal, either
	// way round.
	comparison = regexp.MustCompile(`([\w.$]+)\s*(?:=|<>|!=)\s*'([^']*)'|'([^']*)'\s*(?:=|<>|!=)\s*([\w.$]+)`)
	// stateIn is a state column tested against a list of literals.
	stateIn = regexp.MustCompile(`(?i)([\w.]*\bstate)\s+(?:NOT\s+)?IN\s*\(\s*'`)
	// stateColumn is a column named state (qualified or not).
	stateColumn = regexp.MustCompile(`(?i)(^|\.)state$`)
	// kindColumn: the type of an event and the kind of a job are no
	// states, though an event may be named after one (cancelled,
	// skipped).
	kindColumn = regexp.MustCompile(`(?i)(^|\.)(type|kind)$`)
	sqlComment = regexp.MustCompile(`--[^\n]*`)
)

// unnamedStates returns a description of each state that sql writes as a
// literal in a list or a comparison, where it must name a fragment of
// db/lifecycle.go: a list of literals with a state among them, a
// comparison of anything with a state literal, or of a state column with
// any literal.
func unnamedStates(sql string, words []string) []string {
	sql = sqlComment.ReplaceAllString(sql, "")
	var out []string
	for _, list := range literalList.FindAllString(sql, -1) {
		var members []string
		for _, m := range quoted.FindAllStringSubmatch(list, -1) {
			members = append(members, strings.Split(strings.Trim(m[1], "{}"), ",")...)
		}
		if slices.ContainsFunc(members, func(m string) bool { return slices.Contains(words, strings.Trim(m, ` "`)) }) {
			out = append(out, "a literal state list "+list)
		}
	}
	for _, m := range comparison.FindAllStringSubmatch(sql, -1) {
		operand, lit := m[1]+m[4], m[2]+m[3]
		if kindColumn.MatchString(operand) {
			continue
		}
		if slices.Contains(words, lit) || stateColumn.MatchString(operand) {
			out = append(out, "a literal state comparison "+m[0])
		}
	}
	for _, m := range stateIn.FindAllStringSubmatch(sql, -1) {
		out = append(out, "a state column in a literal list: "+m[0])
	}
	return out
}

// TestStatesAreNamed: every state list and state comparison in a
// statement of db/ names a fragment of db/lifecycle.go (built from
// service/lifecycle, rivertype or the replica states), never a literal:
// a state added to a set then reaches every statement that means the set.
// The fragments themselves are built from those constants, never from a
// string written in db/.
func TestStatesAreNamed(t *testing.T) {
	t.Parallel()
	words := stateWords()
	files := parseDir(t, ".")
	checked := 0
	for _, s := range stringsOf(files) {
		text := strings.Join(strings.Fields(s.text), " ")
		if !regexp.MustCompile(`(?i)\b(SELECT|INSERT|UPDATE|DELETE|WHERE|CASE|AND|OR)\b`).MatchString(text) {
			continue
		}
		checked++
		for _, miss := range unnamedStates(text, words) {
			t.Errorf("%s (%s): %s: name it through db/lifecycle.go: %q", s.pos, s.fn, miss, text)
		}
	}
	require.Greater(t, checked, 100, "the test found the statements of db/")

	fragments := 0
	for _, f := range files {
		ast.Inspect(f.file, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok || !isFragment(call) {
				return true
			}
			fragments++
			for _, a := range call.Args {
				if lit, ok := a.(*ast.BasicLit); ok && lit.Kind == token.STRING {
					t.Errorf("%s: a state fragment built from the literal %s: use service/lifecycle's constant",
						f.fset.Position(lit.Pos()), lit.Value)
				}
			}
			return true
		})
	}
	require.Greater(t, fragments, 20, "the test found the fragments of db/lifecycle.go")
}

// TestStateCheckFindsLiterals: the check itself, on statements that write
// states by hand, and on their named forms.
func TestStateCheckFindsLiterals(t *testing.T) {
	t.Parallel()
	words := stateWords()
	bad := []string{
		`SELECT 1 FROM executions e WHERE e.state IN ('pending', 'running', 'retrying')`,
		`SELECT 1 FROM executions WHERE state NOT IN ('cancelled')`,
		`UPDATE executions SET state = 'cancelled' WHERE tenant_id = $1`,
		`SELECT 1 FROM executions e WHERE 'running' = e.state`,
		`UPDATE executions SET finished_at = CASE WHEN $3 = 'retrying' THEN NULL END`,
		`DELETE FROM u WHERE $3 IN ('succeeded', 'failed')`,
		`SELECT 1 FROM replicas WHERE state <> 'alive'`,
		`SELECT 1 FROM replicas WHERE state IN ('alive')`,
		`SELECT 1 FROM river_job WHERE state = ANY('{available,scheduled}')`,
		`SELECT 1 FROM river_job WHERE state = ANY(ARRAY['available', 'scheduled'])`,
	}
	for _, sql := range bad {
		require.NotEmpty(t, unnamedStates(sql, words), sql)
	}
	ok := []string{
		`SELECT 1 FROM executions e WHERE e.state IN ⟨execUnfinished⟩ AND e.trigger = 'schedule'`,
		`UPDATE executions SET state = ⟨execCancelled⟩ WHERE tenant_id = $1`,
		`INSERT INTO execution_events (tenant_id, execution_id, type) SELECT tenant_id, id, 'cancelled' FROM c`,
		`SELECT 1 FROM execution_events v WHERE v.type = 'skipped'`,
		`SELECT 1 FROM tasks t WHERE t.overlap_policy IN ('skip', 'queue') -- 'pending' in a comment`,
	}
	for _, sql := range ok {
		require.Empty(t, unnamedStates(sql, words), sql)
	}
}

// TestSchemaAgreesWithTheLifecycle: the migrated schema's state
// constraints and partial-index predicates list exactly service/lifecycle's
// states and sets, so that a state added to the lifecycle without its
// migration (or the other way round) fails here rather than in a
// constraint violation at run time.
func TestSchemaAgreesWithTheLifecycle(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.Pool(t)
	def := func(sql, name string) []string {
		var text string
		require.NoError(t, pool.QueryRow(ctx, sql, name).Scan(&text), name)
		var out []string
		for _, m := range regexp.MustCompile(`'([^']*)'`).FindAllStringSubmatch(text, -1) {
			out = append(out, m[1])
		}
		slices.Sort(out)
		return out
	}
	check := func(table string) []string {
		return def(`SELECT pg_get_constraintdef(c.oid) FROM pg_constraint c
			WHERE c.conrelid = $1::regclass AND c.contype = 'c' AND pg_get_constraintdef(c.oid) ~ '\(state = ANY'`, table)
	}
	index := func(name string) []string {
		return def(`SELECT pg_get_expr(i.indpred, i.indrelid) FROM pg_index i WHERE i.indexrelid = $1::regclass`, name)
	}
	constraint := func(name string) []string {
		return def(`SELECT pg_get_constraintdef(oid) FROM pg_constraint WHERE conname = $1`, name)
	}
	sorted := func(s lifecycle.Set) []string {
		out := s.States()
		slices.Sort(out)
		return out
	}
	for _, c := range []struct {
		what string
		got  []string
		want lifecycle.Set
	}{
		{"executions' state check", check("executions"), lifecycle.Executions.States()},
		{"workflow_runs' state check", check("workflow_runs"), lifecycle.Runs.States()},
		{"workflow_run_nodes' state check", check("workflow_run_nodes"), lifecycle.Nodes.States()},
		{"tasks' state check", check("tasks"), lifecycle.TaskStates},
		{"workflows' state check", check("workflows"), lifecycle.WorkflowStates},
		{"backfills' state check", check("backfills"), lifecycle.BackfillStates},
		{"executions_final_reason (last_error)", constraint("executions_final_reason"), lifecycle.ExecUnsuccessful},
		{"workflow_runs_unfinished_idx", index("workflow_runs_unfinished_idx"), lifecycle.RunUnfinished},
	} {
		require.Equal(t, sorted(c.want), c.got, "%s and service/lifecycle disagree", c.what)
	}
}
