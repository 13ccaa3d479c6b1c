package jobs

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The product's packages, relative to jobs/, that the rules below read.
var ruleDirs = []string{"../api", "../cmd", "../db", "../jobs", "../service"}

// goStatements lists the goroutines started outside the Runner's loops:
// by file and enclosing function, how many go statements (or Go calls)
// it holds, and why they are no background loop. Everything else that
// loops in the background is a Loop registered with the process's Runner
// (jobs.Runner).
var goStatements = map[string]struct {
	n   int
	why string
}{
	"jobs/runner.go (*Runner).Start":    {1, "the runner's start sequence: its steps, then each loop's goroutine"},
	"jobs/runner.go (*Runner).startAll": {1, "the runner starting a registered loop"},
	"cmd/server/serve.go serve": {1, "the API's HTTP server (net/http's accept loop): stopped by Shutdown, " +
		"first in the shutdown order"},
	"cmd/server/debug.go serveDebug": {1, "the pprof HTTP server on AX_DEBUG_ADDR: closed when serve returns"},
	"jobs/deliver_batch.go (*DeliverBatchWorker).Work": {2, "per-job work: a goroutine per member of the batch, " +
		"and the batch's watch for cancel requests, all ended and waited for before the job returns"},
	"jobs/scheduler.go claimDue": {1, "claims of a backlog at once (SchedulerLoopConfig.Claimers), each ending " +
		"when its claim is not full; waited for before the scheduler's pass returns"},
	"jobs/eventrun.go (*EventRunner).Run": {1, "per-fire work: an event's fire's attempt, as River's worker " +
		"would run its job; bounded by the job timeout, counted and waited for by Stop"},
	"jobs/eventrun.go (*EventRunner).Stop": {1, "waits once for the attempts in flight to end; Stop waits for it"},
	"db/pglocal/pglocal.go (*Cluster).start": {1, "waits once for the embedded postgres process to exit (no loop); " +
		"Stop waits for it"},
	// ax runner is a program of its own (no scheduler, no Runner): its
	// goroutines live as long as one command or one request.
	"cmd/server/runnercmd.go runRunner":      {1, "ax runner's HTTP server: shut down after the runner drains"},
	"cmd/server/runner/process.go execute":   {1, "waits for one command's process; the run waits for it"},
	"cmd/server/runner/process.go groupGone": {1, "polls until a killed process group is empty, then ends"},
	"cmd/server/runner/runner.go (*Runner).serve": {3, "one command's run, its heartbeats and a completion " +
		"answered from the record; Shutdown waits for them"},
	"cmd/server/runner/runner.go (*Runner).Shutdown": {1, "waits for the runs to end, once"},
	// ax apply is a client: its goroutines are API calls, waited for.
	"cmd/server/apply/apply.go fetch":    {1, "lists each kind at once; waited for"},
	"cmd/server/apply/apply.go parallel": {1, "a bounded number of API writes at once; waited for"},
}

// TestEveryLoopHasAnOwner: no go statement (nor a WaitGroup's or an
// errgroup's Go) in the product's code beyond the ones goStatements
// lists with a reason. A new background loop is a Loop registered with
// the Runner, which starts it in order, stops it in reverse, logs and
// counts its passes and recovers its panics; a goroutine that loops on
// its own has none of that. An entry whose count no longer matches fails
// too.
func TestEveryLoopHasAnOwner(t *testing.T) {
	t.Parallel()
	seen := map[string]int{}
	for _, f := range parseProduct(t, false) {
		for _, fn := range f.file.Decls {
			d, ok := fn.(*ast.FuncDecl)
			if !ok || d.Body == nil {
				continue
			}
			where := f.rel + " " + funcName(d)
			ast.Inspect(d.Body, func(n ast.Node) bool {
				var pos token.Pos
				switch n := n.(type) {
				case *ast.GoStmt:
					pos = n.Pos()
				case *ast.CallExpr:
					if sel, ok := n.Fun.(*ast.SelectorExpr); ok && sel.Sel.Name == "Go" {
						pos = n.Pos()
					}
				}
				if !pos.IsValid() {
					return true
				}
				seen[where]++
				if seen[where] > goStatements[where].n {
					t.Errorf("%s: a goroutine started in %s: make it a jobs.Loop registered with the process's Runner "+
						"(cmd/server/background.go), or, when it is no background loop, list it in goStatements with why",
						f.fset.Position(pos), where)
				}
				return true
			})
		}
	}
	for _, where := range slices.Sorted(maps.Keys(goStatements)) {
		require.Equal(t, goStatements[where].n, seen[where], "goStatements expects %d goroutines started in %s",
			goStatements[where].n, where)
	}
}

// packageState lists the package-level variables that hold state and
// are allowed to, each with why.
var packageState = map[string]string{
	"api.jsonBuffers": "a sync.Pool of scratch buffers: a buffer holds nothing between two uses, so no caller " +
		"sees another's state",
	"api.specQueryParams": "a sync.OnceValue: the query parameters of the embedded OpenAPI document, computed " +
		"once and never written",
	"apply.schemas": "a sync.OnceValue: the create bodies' schemas of the embedded OpenAPI document, read once and " +
		"never written",
	"apply.patterns": "a cache of the embedded document's compiled patterns: the same regexp for the same text, " +
		"whoever asks",
}

// stateDirs are left out of TestNoPackageLevelState, each with why.
var stateDirs = map[string]string{
	"db/dbtest": "the test harness: one throwaway cluster per test binary, shared by its tests",
}

// TestNoPackageLevelState: the product's packages keep no mutable state
// in package-level variables — a metrics hook, a cache, a flag a test
// flips — since it outlives and crosses every value built by New…: two
// servers in one process (the tests run several) would share it, and a
// test that sets it cannot run in parallel. State lives in the values
// cmd/server builds and injects. A variable is state when it holds a
// sync or sync/atomic value (a Mutex, a Map, an atomic, a Once…), or
// when any code, tests included, writes it after its declaration outside
// init: an assignment, an element or field set, an increment, delete or
// clear, its address taken. Constant-like variables — sentinel errors,
// compiled regexps, lookup tables only read — pass. (A type checker would
// also see state hidden behind a constructor's result type; this reads
// the syntax, which is enough for what the product declares and keeps
// the test fast and free of new dependencies.)
func TestNoPackageLevelState(t *testing.T) {
	t.Parallel()
	files := parseProduct(t, true)
	type global struct {
		pkg, name string
		spec      *ast.ValueSpec
		pos       token.Position
		why       string
	}
	globals := map[string]*global{} // "pkg.name"
	for _, f := range files {
		if f.test || stateDirs[filepath.Dir(f.rel)] != "" {
			continue
		}
		for _, decl := range f.file.Decls {
			gd, ok := decl.(*ast.GenDecl)
			if !ok || gd.Tok != token.VAR {
				continue
			}
			for _, spec := range gd.Specs {
				vs := spec.(*ast.ValueSpec) //nolint:forcetypeassert // a var declaration holds ValueSpecs
				for _, id := range vs.Names {
					if id.Name == "_" {
						continue
					}
					g := &global{pkg: f.file.Name.Name, name: id.Name, spec: vs, pos: f.fset.Position(id.Pos())}
					if mentionsSync(vs) {
						g.why = "holds a sync or sync/atomic value"
					}
					globals[f.dir+"\x00"+id.Name] = g
				}
			}
		}
	}
	// Writes: in the package's own files (tests included) by name, and
	// anywhere as pkg.Name.
	for _, f := range files {
		for _, decl := range f.file.Decls {
			fd, ok := decl.(*ast.FuncDecl)
			if !ok || fd.Body == nil || (fd.Recv == nil && fd.Name.Name == "init") {
				continue
			}
			locals := localNames(fd)
			for _, target := range writesIn(fd.Body, locals) {
				var g *global
				switch x := target.(type) {
				case *ast.Ident:
					g = globals[f.dir+"\x00"+x.Name]
					if g != nil && g.pkg != f.file.Name.Name {
						g = nil // an external test package's own
					}
				case *ast.SelectorExpr:
					pkg := x.X.(*ast.Ident) //nolint:forcetypeassert // root returns pkg.Name selectors only
					for _, cand := range globals {
						if cand.pkg == pkg.Name && cand.name == x.Sel.Name {
							g = cand
						}
					}
				}
				if g != nil && g.why == "" {
					g.why = "written at " + f.fset.Position(target.Pos()).String()
				}
			}
		}
	}
	listed := map[string]bool{}
	for _, g := range globals {
		key := g.pkg + "." + g.name
		if g.why == "" {
			continue
		}
		if _, ok := packageState[key]; ok {
			listed[key] = true
			continue
		}
		t.Errorf("%s: package-level variable %s %s: keep state in a value built by New… and injected through a "+
			"Config, or list it in packageState with why", g.pos, key, g.why)
	}
	for _, key := range slices.Sorted(maps.Keys(packageState)) {
		require.True(t, listed[key], "packageState lists %s, which is no package-level state any more: remove it", key)
	}
}

// productFile is a parsed Go file of the product.
type productFile struct {
	fset *token.FileSet
	file *ast.File
	rel  string // path from the repository's root
	dir  string // rel's directory
	test bool
}

// parseProduct parses the Go files of ruleDirs (tests only when withTests).
func parseProduct(t *testing.T, withTests bool) []productFile {
	t.Helper()
	var out []productFile
	fset := token.NewFileSet()
	for _, root := range ruleDirs {
		err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() && (d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) {
				return filepath.SkipDir
			}
			if d.IsDir() || !strings.HasSuffix(path, ".go") {
				return nil
			}
			test := strings.HasSuffix(path, "_test.go")
			if test && !withTests {
				return nil
			}
			f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
			if err != nil {
				return err
			}
			rel := filepath.ToSlash(strings.TrimPrefix(path, "../"))
			out = append(out, productFile{fset: fset, file: f, rel: rel, dir: filepath.ToSlash(filepath.Dir(rel)), test: test})
			return nil
		})
		require.NoError(t, err)
	}
	require.NotEmpty(t, out)
	return out
}

// funcName is d's name as "Name" or "(*Recv).Name".
func funcName(d *ast.FuncDecl) string {
	if d.Recv == nil || len(d.Recv.List) == 0 {
		return d.Name.Name
	}
	recv := d.Recv.List[0].Type
	star := ""
	if s, ok := recv.(*ast.StarExpr); ok {
		star, recv = "*", s.X
	}
	if ix, ok := recv.(*ast.IndexExpr); ok { // a generic receiver
		recv = ix.X
	}
	if id, ok := recv.(*ast.Ident); ok {
		return "(" + star + id.Name + ")." + d.Name.Name
	}
	return d.Name.Name
}

// mentionsSync reports whether vs's type or value names a package sync or
// sync/atomic type or function.
func mentionsSync(vs *ast.ValueSpec) bool {
	found := false
	check := func(n ast.Node) bool {
		if sel, ok := n.(*ast.SelectorExpr); ok {
			if id, ok := sel.X.(*ast.Ident); ok && (id.Name == "sync" || id.Name == "atomic") {
				found = true
			}
		}
		return !found
	}
	if vs.Type != nil {
		ast.Inspect(vs.Type, check)
	}
	for _, v := range vs.Values {
		ast.Inspect(v, check)
	}
	return found
}

// writesIn returns the variables body writes that are not locals, each
// as the identifier or pkg.Name selector at the root of what is written.
func writesIn(body *ast.BlockStmt, locals map[string]bool) []ast.Expr {
	var out []ast.Expr
	add := func(e ast.Expr) {
		r := root(e, locals)
		if id, ok := r.(*ast.Ident); ok && locals[id.Name] {
			return
		}
		if r != nil {
			out = append(out, r)
		}
	}
	ast.Inspect(body, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.AssignStmt:
			if n.Tok == token.DEFINE {
				return true
			}
			for _, l := range n.Lhs {
				add(l)
			}
		case *ast.IncDecStmt:
			add(n.X)
		case *ast.UnaryExpr:
			if n.Op == token.AND {
				add(n.X)
			}
		case *ast.CallExpr:
			if id, ok := n.Fun.(*ast.Ident); ok && (id.Name == "delete" || id.Name == "clear") && len(n.Args) > 0 {
				add(n.Args[0])
			}
		}
		return true
	})
	return out
}

// root strips element, field, dereference and parentheses from e down to
// the variable written: an identifier, or a pkg.Name selector.
func root(e ast.Expr, locals map[string]bool) ast.Expr {
	for {
		switch x := e.(type) {
		case *ast.Ident:
			return x
		case *ast.ParenExpr:
			e = x.X
		case *ast.StarExpr:
			e = x.X
		case *ast.IndexExpr:
			e = x.X
		case *ast.SelectorExpr:
			if id, ok := x.X.(*ast.Ident); ok && !locals[id.Name] && isPackageName(id.Name) {
				return x
			}
			e = x.X
		default:
			return nil
		}
	}
}

// isPackageName reports whether name is one of the product's packages
// (the qualifier of an exported variable written from outside).
func isPackageName(name string) bool {
	switch name {
	case "api", "console", "main", "db", "pglocal", "jobs", "service", "metrics":
		return true
	}
	return false
}

// localNames returns the names fd declares: receiver, parameters,
// results, and every variable its body (and its closures) declares. A
// write to one of them is a local's (this may miss a global written in a
// function that also shadows its name elsewhere: rare, and the syntax
// alone cannot tell).
func localNames(fd *ast.FuncDecl) map[string]bool {
	names := map[string]bool{}
	fields := func(fl *ast.FieldList) {
		if fl == nil {
			return
		}
		for _, f := range fl.List {
			for _, n := range f.Names {
				names[n.Name] = true
			}
		}
	}
	fields(fd.Recv)
	ast.Inspect(fd, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.FuncType:
			fields(n.Params)
			fields(n.Results)
		case *ast.AssignStmt:
			if n.Tok == token.DEFINE {
				for _, l := range n.Lhs {
					if id, ok := l.(*ast.Ident); ok {
						names[id.Name] = true
					}
				}
			}
		case *ast.RangeStmt:
			if n.Tok == token.DEFINE {
				for _, e := range []ast.Expr{n.Key, n.Value} {
					if id, ok := e.(*ast.Ident); ok {
						names[id.Name] = true
					}
				}
			}
		case *ast.ValueSpec:
			for _, id := range n.Names {
				names[id.Name] = true
			}
		case *ast.TypeSwitchStmt:
			if a, ok := n.Assign.(*ast.AssignStmt); ok {
				for _, l := range a.Lhs {
					if id, ok := l.(*ast.Ident); ok {
						names[id.Name] = true
					}
				}
			}
		}
		return true
	})
	return names
}
