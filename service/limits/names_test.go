package limits

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

// limitLike matches what reads as a limit's name in a string of ax: a
// max_… or a …_per_second.
var limitLike = regexp.MustCompile(`\b(max_[a-z_]+|[a-z_]+_per_second)\b`)

// notLimits are the words limitLike matches that are not limits, and
// what they are.
var notLimits = map[string]string{
	"max_attempts":    "a task's retry policy",
	"max_backoff_ms":  "a task's retry policy",
	"max_active_runs": "a workflow's runs at once (a policy of the workflow, not a limit of the tenant)",
}

// sourceDirs are the packages whose strings name limits: the API and the
// console (DTOs, errors), the service (validation, events, reasons), the
// jobs (metrics) and the server (configuration).
var sourceDirs = []string{"../../api", "../../api/console", "..", ".", "../../jobs", "../../cmd/server"}

// literals returns every string literal and struct tag of the non-test
// Go files of dir, with where it is.
func literals(t *testing.T, dir string) map[string]string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	fset := token.NewFileSet()
	out := map[string]string{}
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, name), nil, parser.SkipObjectResolution)
		require.NoError(t, err)
		ast.Inspect(f, func(n ast.Node) bool {
			if lit, ok := n.(*ast.BasicLit); ok && lit.Kind == token.STRING {
				if s, err := strconv.Unquote(lit.Value); err == nil {
					out[s] = fset.Position(lit.Pos()).String()
				}
			}
			return true
		})
	}
	return out
}

// TestNamesAreInTheTable: every limit name a string of ax spells — an
// API field, a validation error's field, an event's data, a metric's
// help, a problem's detail — is a name of Table; and every name of Table
// is served by the API.
func TestNamesAreInTheTable(t *testing.T) {
	t.Parallel()
	names := make([]string, len(Table))
	for i, l := range Table {
		names[i] = l.Name
	}
	used := map[string]bool{}
	for _, dir := range sourceDirs {
		for s, pos := range literals(t, dir) {
			for _, w := range limitLike.FindAllString(s, -1) {
				if _, ok := notLimits[w]; ok {
					continue
				}
				require.Contains(t, names, w, "%s spells %q, which is not a limit of limits.Table: add it there, "+
					"or to notLimits if it is no limit", pos, w)
				if strings.HasPrefix(dir, "../../api") {
					used[w] = true
				}
			}
		}
	}
	for _, n := range names {
		require.True(t, used[n], "limits.Table has %s, which the API does not serve", n)
	}
	require.Len(t, slices.Compact(slices.Sorted(slices.Values(names))), len(names), "each name once")
}

// TestDocsListTheTable: the limits listed in docs/architecture.md
// ("Limits and fairness") are Table's, with their scopes.
func TestDocsListTheTable(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile("../../docs/architecture.md")
	require.NoError(t, err)
	text := string(doc)
	start := strings.Index(text, "## Limits and fairness")
	require.NotEqual(t, -1, start, "the section is there")
	section := text[start+1:]
	if end := strings.Index(section, "\n## "); end >= 0 {
		section = section[:end]
	}
	row := regexp.MustCompile("(?m)^\\| `([a-z_]+)` \\| ([a-z]+) \\|")
	var listed []string
	for _, m := range row.FindAllStringSubmatch(section, -1) {
		listed = append(listed, m[1]+" "+m[2])
	}
	var want []string
	for _, l := range Table {
		want = append(want, l.Name+" "+string(l.Scope))
	}
	require.Equal(t, want, listed, "docs/architecture.md lists the limits of limits.Table, in its order")
}
