package lifecycle

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// architecture is the document that draws the execution lifecycle.
const architecture = "../../docs/architecture.md"

// section returns the text of the section of doc under heading, up to the
// next heading of its level.
func section(t *testing.T, doc, heading string) string {
	t.Helper()
	i := strings.Index(doc, "\n"+heading+"\n")
	require.GreaterOrEqual(t, i, 0, "%s has a section %q", architecture, heading)
	rest := doc[i+len(heading)+2:]
	if j := strings.Index(rest, "\n## "); j >= 0 {
		rest = rest[:j]
	}
	return rest
}

// fenced returns the first fenced block of text after marker ("" for the
// first of all), without its fences.
func fenced(t *testing.T, text, marker string) string {
	t.Helper()
	i := strings.Index(text, marker)
	require.GreaterOrEqual(t, i, 0, "the section holds %q", marker)
	text = text[i+len(marker):]
	start := strings.Index(text, "```")
	require.GreaterOrEqual(t, start, 0, "a fenced block follows %q", marker)
	body := text[start+3:]
	body = body[strings.Index(body, "\n")+1:] // the fence's info string
	end := strings.Index(body, "```")
	require.GreaterOrEqual(t, end, 0, "the fenced block after %q ends", marker)
	return body[:end]
}

var pair = regexp.MustCompile(`^\s*([a-z_]+)\s*->\s*([a-z_]+)\s*$`)

// TestDiagramShowsTheTransitions: docs/architecture.md's "Executions"
// section lists exactly the transitions of Executions (a machine-readable
// list beside its drawing), and its drawing names every execution state,
// no other state, and no state that the table neither enters nor leaves. A transition added to the table, or a state, fails
// here until the document shows it.
func TestDiagramShowsTheTransitions(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile(architecture)
	require.NoError(t, err)
	sec := section(t, string(raw), "## Executions")

	var listed []string
	for line := range strings.SplitSeq(fenced(t, sec, "<!-- lifecycle.Executions"), "\n") {
		if strings.TrimSpace(line) == "" {
			continue
		}
		m := pair.FindStringSubmatch(line)
		require.NotNil(t, m, "%q is a line `from -> to`", line)
		listed = append(listed, m[1]+" -> "+m[2])
	}
	var table []string
	for _, tr := range Executions.Transitions() {
		table = append(table, tr.From+" -> "+tr.To)
	}
	slices.Sort(listed)
	slices.Sort(table)
	require.Equal(t, table, listed, "%s lists other transitions than lifecycle.Executions", architecture)

	drawing := fenced(t, sec, "")
	words := regexp.MustCompile(`[a-z_]+`).FindAllString(drawing, -1)
	for _, s := range Executions.States().States() {
		require.Contains(t, words, s, "the drawing of %s shows the state %s", architecture, s)
	}
	var others []string
	for _, m := range []Machine{Runs, Nodes} {
		others = append(others, m.States().States()...)
	}
	for _, w := range words {
		if slices.Contains(others, w) {
			require.True(t, Executions.States().Has(w), "the drawing of %s shows %s, which is no execution state", architecture, w)
		}
		if Executions.States().Has(w) {
			require.True(t, slices.ContainsFunc(Executions.Transitions(), func(tr Transition) bool { return tr.From == w || tr.To == w }),
				"the drawing of %s shows %s, which no transition of lifecycle.Executions enters or leaves", architecture, w)
		}
	}
}
