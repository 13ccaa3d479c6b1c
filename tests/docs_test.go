package tests

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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
				_, err := os.Stat(filepath.Join(repoRoot, rel))
				assert.NoErrorf(t, err, "%s:%d links to %s, which does not exist", page, line, target)
			}
			if frag != "" && strings.HasSuffix(rel, ".md") {
				assert.Truef(t, anchorsOf(rel)[frag], "%s:%d links to %s: %s has no heading #%s",
					page, line, target, rel, frag)
			}
		}
	}
	require.Greater(t, checked, 50, "found the pages' links")
}
