package tests

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestNoFailNowOffTheTestGoroutine keeps require (and t.Fatal, t.FailNow)
// on the goroutine that runs the test, in every _test.go file of the
// module. FailNow called from another goroutine does not stop the test:
// it ends that goroutine only (testing's documentation), so the test goes
// on, or hangs waiting for what the goroutine would have sent. Code run by
// a go statement, by a closure given to a Go method (sync.WaitGroup,
// errgroup) or to time.AfterFunc, by an HTTP handler (a function taking
// an http.ResponseWriter), and the condition of assert's and require's
// Eventually, Never and EventuallyWithT (testify runs it on a goroutine
// of its own) must report with assert or t.Error, or hand its error back;
// EventuallyWithT's condition may fail its *assert.CollectT. A call there
// to a function or method of the same package that fails the test
// (require, t.Fatal, or such a call, at any depth; methods are matched by
// name) counts too, and so does handing the test's T to a function of
// another package (dbtest's helpers fail with it). testifylint's
// go-require checks go statements and handlers as it lints; this test
// also sees the closures given to Go, the conditions, and the helpers they
// call. (assert.Condition runs its function on the caller's goroutine.)
func TestNoFailNowOffTheTestGoroutine(t *testing.T) {
	t.Parallel()
	byDir := map[string][]string{}
	err := filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != ".." && (d.Name() == "testdata" || d.Name() == "node_modules" || strings.HasPrefix(d.Name(), ".")) {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(path, "_test.go") {
			byDir[filepath.Dir(path)] = append(byDir[filepath.Dir(path)], path)
		}
		return nil
	})
	require.NoError(t, err)
	require.Greater(t, len(byDir), 10, "the walk found the module's test packages")
	var found []string
	for _, files := range byDir {
		found = append(found, offGoroutineFailures(t, files)...)
	}
	sort.Strings(found)
	require.Empty(t, found, "require, t.Fatal or t.FailNow off the test's goroutine: report with assert or t.Error, or send the error back")
}

// offGoroutineFailures checks the test files of one directory.
func offGoroutineFailures(t *testing.T, files []string) []string {
	t.Helper()
	fset := token.NewFileSet()
	var parsed []*ast.File
	for _, f := range files {
		af, err := parser.ParseFile(fset, f, nil, parser.SkipObjectResolution)
		require.NoError(t, err)
		parsed = append(parsed, af)
	}
	// The functions and methods (by name) that fail the test, directly or
	// through another.
	decls := map[string][]*ast.FuncDecl{}
	for _, af := range parsed {
		for _, d := range af.Decls {
			if fd, ok := d.(*ast.FuncDecl); ok && fd.Body != nil {
				decls[fd.Name.Name] = append(decls[fd.Name.Name], fd)
			}
		}
	}
	fails := map[string]bool{}
	for changed := true; changed; {
		changed = false
		for name, fds := range decls {
			for _, fd := range fds {
				if !fails[name] && (&failures{fails: fails, locals: localFuncs(fd)}).first(fd.Body) != "" {
					fails[name], changed = true, true
				}
			}
		}
	}
	// The fields that hold a test's T (h.t).
	tFields := map[string]bool{}
	for _, af := range parsed {
		ast.Inspect(af, func(n ast.Node) bool {
			if st, ok := n.(*ast.StructType); ok {
				for _, fl := range st.Fields.List {
					if isTestingT(fl.Type) {
						for _, name := range fl.Names {
							tFields[name.Name] = true
						}
					}
				}
			}
			return true
		})
	}
	var out []string
	for _, af := range parsed {
		imports := importNames(af)
		for _, d := range af.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Body == nil {
				continue
			}
			f := &failures{fails: fails, locals: localFuncs(fd)}
			tNames := testingParams(fd)
			// givenT describes a call that hands the test's T to a function
			// this check cannot see into (another package's helper, as
			// dbtest's), which may fail the test with it; "" otherwise.
			givenT := func(c *ast.CallExpr) string {
				if !slices.ContainsFunc(c.Args, func(a ast.Expr) bool {
					switch a := a.(type) {
					case *ast.Ident:
						return tNames[a.Name]
					case *ast.SelectorExpr:
						return tFields[a.Sel.Name]
					}
					return false
				}) {
					return ""
				}
				switch fn := c.Fun.(type) {
				case *ast.Ident:
					if decls[fn.Name] != nil || f.locals[fn.Name] != nil {
						return "" // the package's own: f.call judged it
					}
					return "a call to " + fn.Name + " given the test's T"
				case *ast.SelectorExpr:
					x, ok := fn.X.(*ast.Ident)
					if ok && (x.Name == "assert" || x.Name == "require") {
						return ""
					}
					if ok && imports[x.Name] {
						return "a call to " + x.Name + "." + fn.Sel.Name + ", of another package, given the test's T"
					}
					if decls[fn.Sel.Name] != nil {
						return "" // a method of the package's: f.call judged it
					}
					return "a call to " + fn.Sel.Name + " given the test's T"
				}
				return "a call given the test's T"
			}
			check := func(body ast.Node, where string) {
				ast.Inspect(body, func(n ast.Node) bool {
					if c, ok := n.(*ast.CallExpr); ok {
						what := f.call(c)
						if what == "" {
							what = givenT(c)
						}
						if what != "" {
							out = append(out, fset.Position(c.Pos()).String()+": "+what+" in "+where)
						}
					}
					return true
				})
			}
			// checkCondition checks the condition of Eventually, Never or
			// EventuallyWithT. EventuallyWithT's is given a *CollectT: a
			// call that reports to it (assert or require on it, a helper
			// given it first) fails that tick only, as it should.
			checkCondition := func(fl *ast.FuncLit, where string) {
				collect := collectParam(fl)
				ast.Inspect(fl.Body, func(n ast.Node) bool {
					c, ok := n.(*ast.CallExpr)
					if !ok {
						return true
					}
					if collect != "" && reportsTo(c, collect) {
						return true
					}
					what := f.call(c)
					if what == "" {
						what = givenT(c)
					}
					if what != "" {
						out = append(out, fset.Position(c.Pos()).String()+": "+what+" in "+where)
					}
					return true
				})
			}
			if isHandlerFunc(fd.Type) {
				check(fd.Body, "the HTTP handler "+fd.Name.Name)
				continue
			}
			ast.Inspect(fd.Body, func(n ast.Node) bool {
				switch n := n.(type) {
				case *ast.GoStmt:
					if fl, ok := n.Call.Fun.(*ast.FuncLit); ok {
						check(fl.Body, "a go statement")
					} else if what := f.call(n.Call); what != "" {
						out = append(out, fset.Position(n.Pos()).String()+": go statement: "+what)
					}
					return false
				case *ast.CallExpr:
					if s, ok := n.Fun.(*ast.SelectorExpr); ok && isEventually(s) && len(n.Args) > 1 {
						where := "the condition of " + s.X.(*ast.Ident).Name + "." + s.Sel.Name
						switch a := n.Args[1].(type) {
						case *ast.FuncLit:
							checkCondition(a, where)
						case *ast.Ident, *ast.SelectorExpr:
							if name := funcName(a); f.fails[name] || f.locals[name] != nil && f.first(f.locals[name].Body) != "" {
								out = append(out, fset.Position(a.Pos()).String()+": "+name+", which fails the test, is "+where)
							}
						case *ast.CallExpr:
							// A function that makes the condition: the closures
							// it returns.
							if id, ok := a.Fun.(*ast.Ident); ok {
								var makers []*ast.FuncLit
								if fl := f.locals[id.Name]; fl != nil {
									makers = append(makers, fl)
								}
								for _, fd := range decls[id.Name] {
									makers = append(makers, &ast.FuncLit{Type: fd.Type, Body: fd.Body})
								}
								for _, m := range makers {
									for _, fl := range returnedFuncs(m) {
										checkCondition(fl, where+" made by "+id.Name)
									}
								}
							}
						}
					}
					if s, ok := n.Fun.(*ast.SelectorExpr); ok && (s.Sel.Name == "Go" || s.Sel.Name == "AfterFunc") {
						for _, a := range n.Args {
							switch a := a.(type) {
							case *ast.FuncLit:
								check(a.Body, "a closure given to "+s.Sel.Name)
							case *ast.Ident:
								if f.fails[a.Name] || f.locals[a.Name] != nil && f.first(f.locals[a.Name].Body) != "" {
									out = append(out, fset.Position(a.Pos()).String()+": "+a.Name+", which fails the test, given to "+s.Sel.Name)
								}
							}
						}
					}
				case *ast.FuncLit:
					if isHandlerFunc(n.Type) {
						check(n.Body, "an HTTP handler")
						return false
					}
				}
				return true
			})
		}
	}
	return out
}

// isEventually reports assert's and require's functions that run a
// condition on a goroutine of their own: Eventually, Never,
// EventuallyWithT (and their f forms).
func isEventually(s *ast.SelectorExpr) bool {
	id, ok := s.X.(*ast.Ident)
	if !ok || id.Name != "assert" && id.Name != "require" {
		return false
	}
	switch strings.TrimSuffix(s.Sel.Name, "f") {
	case "Eventually", "Never", "EventuallyWithT":
		return true
	}
	return false
}

// isTestingT reports *testing.T, *testing.B and testing.TB.
func isTestingT(e ast.Expr) bool {
	if st, ok := e.(*ast.StarExpr); ok {
		e = st.X
	}
	s, ok := e.(*ast.SelectorExpr)
	if !ok {
		return false
	}
	pkg, ok := s.X.(*ast.Ident)
	return ok && pkg.Name == "testing" && (s.Sel.Name == "T" || s.Sel.Name == "B" || s.Sel.Name == "TB")
}

// testingParams returns the names fd and its closures take a test's T by.
func testingParams(fd *ast.FuncDecl) map[string]bool {
	names := map[string]bool{}
	add := func(ft *ast.FuncType) {
		for _, p := range ft.Params.List {
			if isTestingT(p.Type) {
				for _, n := range p.Names {
					names[n.Name] = true
				}
			}
		}
	}
	add(fd.Type)
	ast.Inspect(fd.Body, func(n ast.Node) bool {
		if fl, ok := n.(*ast.FuncLit); ok {
			add(fl.Type)
		}
		return true
	})
	return names
}

// importNames returns the names af refers to its imports by.
func importNames(af *ast.File) map[string]bool {
	names := map[string]bool{}
	for _, im := range af.Imports {
		if im.Name != nil {
			names[im.Name.Name] = true
			continue
		}
		elems := strings.Split(strings.Trim(im.Path.Value, `"`), "/")
		name := elems[len(elems)-1]
		if len(elems) > 1 && len(name) > 1 && name[0] == 'v' && strings.Trim(name[1:], "0123456789") == "" {
			name = elems[len(elems)-2] // a major version's suffix: pgx/v5
		}
		names[strings.TrimPrefix(strings.TrimSuffix(name, "-go"), "go-")] = true
	}
	return names
}

// funcName is the name of a function (f) or method (x.f) given as a value.
func funcName(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.Ident:
		return e.Name
	case *ast.SelectorExpr:
		return e.Sel.Name
	}
	return ""
}

// returnedFuncs returns the closures fl returns.
func returnedFuncs(fl *ast.FuncLit) []*ast.FuncLit {
	var out []*ast.FuncLit
	ast.Inspect(fl.Body, func(n ast.Node) bool {
		if r, ok := n.(*ast.ReturnStmt); ok {
			for _, e := range r.Results {
				if f, ok := e.(*ast.FuncLit); ok {
					out = append(out, f)
				}
			}
		}
		return true
	})
	return out
}

// collectParam is the name of the *assert.CollectT an EventuallyWithT
// condition takes, or "".
func collectParam(fl *ast.FuncLit) string {
	for _, p := range fl.Type.Params.List {
		if st, ok := p.Type.(*ast.StarExpr); ok {
			if s, ok := st.X.(*ast.SelectorExpr); ok && s.Sel.Name == "CollectT" && len(p.Names) == 1 {
				return p.Names[0].Name
			}
		}
	}
	return ""
}

// reportsTo reports a call that fails on collect: collect.FailNow(), or
// a function (assert's, require's, a helper) given collect first.
func reportsTo(c *ast.CallExpr, collect string) bool {
	if s, ok := c.Fun.(*ast.SelectorExpr); ok {
		if id, ok := s.X.(*ast.Ident); ok && id.Name == collect {
			return true
		}
	}
	if len(c.Args) > 0 {
		if id, ok := c.Args[0].(*ast.Ident); ok && id.Name == collect {
			return true
		}
	}
	return false
}

// localFuncs returns the closures fd assigns to names (f := func…), which
// a call by that name in fd runs.
func localFuncs(fd *ast.FuncDecl) map[string]*ast.FuncLit {
	locals := map[string]*ast.FuncLit{}
	ast.Inspect(fd.Body, func(n ast.Node) bool {
		if as, ok := n.(*ast.AssignStmt); ok && len(as.Lhs) == len(as.Rhs) {
			for i, l := range as.Lhs {
				id, isID := l.(*ast.Ident)
				fl, isLit := as.Rhs[i].(*ast.FuncLit)
				if isID && isLit {
					locals[id.Name] = fl
				}
			}
		}
		return true
	})
	return locals
}

// failures tells the calls that fail the test within one function: those
// of require, *.Fatal*, *.FailNow, and calls of the package's functions
// and methods in fails or of the function's closures that make one.
type failures struct {
	fails  map[string]bool
	locals map[string]*ast.FuncLit
	seen   map[*ast.FuncLit]bool // closures being looked at (recursion)
}

// first describes the first call in body that fails the test, or "".
func (f *failures) first(body ast.Node) string {
	var what string
	ast.Inspect(body, func(n ast.Node) bool {
		if c, ok := n.(*ast.CallExpr); ok && what == "" {
			what = f.call(c)
		}
		return what == ""
	})
	return what
}

// call describes c when it fails the test, or returns "".
func (f *failures) call(c *ast.CallExpr) string {
	if s, ok := c.Fun.(*ast.SelectorExpr); ok {
		if id, ok := s.X.(*ast.Ident); ok && id.Name == "require" {
			return "require." + s.Sel.Name
		}
		if strings.HasPrefix(s.Sel.Name, "Fatal") || s.Sel.Name == "FailNow" {
			return s.Sel.Name
		}
	}
	name := calleeName(c)
	if id, ok := c.Fun.(*ast.Ident); ok && f.locals[id.Name] != nil {
		fl := f.locals[id.Name]
		if f.seen[fl] {
			return ""
		}
		if f.seen == nil {
			f.seen = map[*ast.FuncLit]bool{}
		}
		f.seen[fl] = true
		defer delete(f.seen, fl)
		if what := f.first(fl.Body); what != "" {
			return "a call to " + name + ", which makes " + what
		}
		return ""
	}
	if f.fails[name] {
		return "a call to " + name + ", which fails the test"
	}
	return ""
}

// calleeName is the name of the function or method c calls ("" for
// assert's and require's own, and for a function value).
func calleeName(c *ast.CallExpr) string {
	switch f := c.Fun.(type) {
	case *ast.Ident:
		return f.Name
	case *ast.SelectorExpr:
		if id, ok := f.X.(*ast.Ident); ok && (id.Name == "require" || id.Name == "assert") {
			return ""
		}
		return f.Sel.Name
	}
	return ""
}

// isHandlerFunc reports a function taking an http.ResponseWriter.
func isHandlerFunc(ft *ast.FuncType) bool {
	for _, p := range ft.Params.List {
		if s, ok := p.Type.(*ast.SelectorExpr); ok && s.Sel.Name == "ResponseWriter" {
			return true
		}
	}
	return false
}
