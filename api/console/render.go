package console

import (
	"bytes"
	"fmt"
	"html"
	"html/template"
	"slices"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/axhq/ax/service"
)

// pages are the parsed templates, one set per page: the layout plus the
// page's "content".
type pages map[string]*template.Template

// pageNames lists the templates/<name>.html files that are pages.
var pageNames = []string{
	"signin", "error", "tasks", "task", "task_new", "execution", "endpoints", "secret", "dashboard", "backfills", "workflows", "workflow", "workflow_run",
	"alerts", "task_edit", "endpoint_edit", "audit", "calendars", "calendar", "limits", "events",
	"workflow_edit",
}

func mustParsePages() pages {
	out := pages{}
	for _, name := range pageNames {
		t := template.New("layout.html").Funcs(funcs)
		t = template.Must(t.ParseFS(templateFS, "templates/layout.html", "templates/partials.html", "templates/charts.html", "templates/forms.html",
			"templates/"+name+".html"))
		out[name] = t
	}
	return out
}

// view is what every page template gets: the page's own data in Data.
type view struct {
	Title string
	// Nav names the menu entry to mark current.
	Nav  string
	S    *session
	Data any
}

// Can reports whether the signed-in token holds scope (templates show
// only the buttons that would work).
func (v view) Can(scope string) bool { return v.S.can(scope) }

// render writes page name with status.
func (c *console) render(ec echo.Context, status int, name string, s *session, data any) error {
	t, ok := c.pages[name]
	if !ok {
		return fmt.Errorf("console: no page %q", name)
	}
	v := view{S: s, Data: data}
	if tv, ok := data.(titled); ok {
		v.Title, v.Nav = tv.title()
	}
	var buf bytes.Buffer
	if err := t.Execute(&buf, v); err != nil {
		return fmt.Errorf("console: render %s: %w", name, err)
	}
	return ec.HTMLBlob(status, buf.Bytes())
}

// titled is page data that names its title and menu entry.
type titled interface{ title() (title, nav string) }

var funcs = template.FuncMap{
	"time":     timeHTML,
	"dur":      durText,
	"ident":    ident,
	"prefix":   func() string { return Prefix },
	"pct":      pct,
	"ms":       msText,
	"deref":    func(p *int) int { return *p },
	"headline": headline,
	"join":     strings.Join,
	"final":    final,
	"ferr":     fieldError,
	"invalid":  invalidAttrs,
	"has":      slices.Contains[[]string],
}

// timeHTML renders an instant as a <time> element: UTC in the page (the
// script shows it in the viewer's zone) and UTC in the tooltip.
func timeHTML(v any) template.HTML {
	var t time.Time
	switch x := v.(type) {
	case time.Time:
		t = x
	case *time.Time:
		if x == nil {
			return "—"
		}
		t = *x
	default:
		return "—"
	}
	if t.IsZero() {
		return "—"
	}
	u := t.UTC()
	iso := html.EscapeString(u.Format(time.RFC3339))
	text := html.EscapeString(u.Format("2006-01-02 15:04:05") + " UTC")
	return template.HTML(`<time datetime="` + iso + `" title="` + text + `">` + text + `</time>`) //nolint:gosec // built from a formatted time, escaped
}

func durText(d time.Duration) string {
	switch {
	case d == 0:
		return "0s"
	case d%time.Hour == 0:
		return fmt.Sprintf("%dh", d/time.Hour)
	case d%time.Minute == 0:
		return fmt.Sprintf("%dm", d/time.Minute)
	case d%time.Second == 0:
		return fmt.Sprintf("%ds", d/time.Second)
	}
	return d.String()
}

// idTailLen is how much of an id the console shows: the end, where two
// UUIDv7 ids made in the same millisecond differ (their first 12 hex
// digits are the time).
const idTailLen = 8

// idTail is the last idTailLen characters of id.
func idTail(id string) string {
	if len(id) > idTailLen {
		return id[len(id)-idTailLen:]
	}
	return id
}

// ident shows an id the one way the console shows ids: the thing's name
// when it has one (name, optional), else the id's tail after an ellipsis
// in <code>; the full id is in the title (on hover) either way.
func ident(id string, name ...string) template.HTML {
	title := html.EscapeString(id)
	if len(name) > 0 && name[0] != "" {
		return template.HTML(`<span class="ident" title="` + title + `">` + html.EscapeString(name[0]) + `</span>`) //nolint:gosec // escaped
	}
	text := html.EscapeString(idTail(id))
	if len(id) > idTailLen {
		text = "…" + text
	}
	return template.HTML(`<code class="ident" title="` + title + `">` + text + `</code>`) //nolint:gosec // escaped
}

func pct(f *float64) string {
	if f == nil {
		return "—"
	}
	return fmt.Sprintf("%.1f%%", *f*100)
}

func msText(f *float64) string {
	if f == nil {
		return "—"
	}
	if *f >= 1000 {
		return fmt.Sprintf("%.2f s", *f/1000)
	}
	return fmt.Sprintf("%.1f ms", *f)
}

// headline is an execution's outcome in a few words.
func headline(x service.ExecutionDetail) string {
	var b strings.Builder
	b.WriteString(x.State)
	if x.LastStatusCode != nil {
		fmt.Fprintf(&b, " · HTTP %d", *x.LastStatusCode)
	}
	if x.LastErrorClass != "" {
		b.WriteString(" · " + x.LastErrorClass)
	}
	return b.String()
}

// final reports whether an execution state is final.
func final(state string) bool {
	switch state {
	case service.ExecPending, service.ExecRunning, service.ExecRetrying:
		return false
	}
	return true
}
