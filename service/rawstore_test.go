package service_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// storeMethods are the methods, besides package db's functions, whose
// errors come from the database: River's client's, which the Enqueuer
// calls (and translates: the enqueuer's own methods return the service's
// errors).
var storeMethods = []string{"Insert", "InsertTx", "InsertMany", "InsertManyTx", "JobCancelTx", "JobDeleteTx", "JobRetryTx"}

// rawStoreAllowed are the functions (path relative to service/, a space,
// the function's name) that may hand a store error on untranslated, and
// why.
var rawStoreAllowed = map[string]string{
	"errs/errs.go Store": "the translation itself: what it cannot classify is an internal error, wrapped with op",
}

// Every error that comes from the database leaves the function that got it
// through the one translation (storeError), so that what the database
// said becomes what the client is told: a serialization failure or a
// deadlock a 409 to try again, a missing row a 404, an outage a 503,
// rather than a 500. The test walks the non-test Go files of service/ and
// its subpackages and fails on each return whose error result is a store
// call's error, untranslated: taken from the call directly, from a
// variable assigned from one, or wrapped by fmt.Errorf.
//
// A store call is a function of package db (db.InTx too), a River insert
// (storeMethods), or a call of a function the function was handed (a
// parameter of func type: what it returns is unknown, so it is treated as
// raw). A closure handed to such a call, or to a function of this
// module's, is exempt: its error comes back out of that call, and is
// checked there.
//
// The flow is followed in source order and by name, not by scope: a
// variable is tainted by its last assignment before the return.
func TestStoreErrorsAreTranslated(t *testing.T) {
	t.Parallel()
	var found []string
	require.NoError(t, filepath.WalkDir(".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return err
		}
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, p, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		imports := map[string]bool{}
		for _, spec := range f.Imports {
			ip, _ := strconv.Unquote(spec.Path.Value)
			name := path.Base(ip)
			if spec.Name != nil {
				name = spec.Name.Name
			}
			imports[name] = true
		}
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			if _, ok := rawStoreAllowed[filepath.ToSlash(p)+" "+fn.Name.Name]; ok {
				continue
			}
			for _, pos := range rawStoreReturns(fn, imports) {
				found = append(found, fset.Position(pos).String()+" ("+fn.Name.Name+")")
			}
		}
		return nil
	}))
	require.Empty(t, found, "a database error returned without storeError:\n%s", strings.Join(found, "\n"))
}

// storeFlow follows store errors through one function.
type storeFlow struct {
	// imports are the names of the file's imported packages.
	imports map[string]bool
	// callbacks are the function's parameters of func type.
	callbacks map[string]bool
	// tainted: the variable holds a store call's error, untranslated.
	tainted map[string]bool
}

// rawStoreReturns lists the returns of fn whose error is a store call's,
// untranslated.
func rawStoreReturns(fn *ast.FuncDecl, imports map[string]bool) []token.Pos {
	fl := storeFlow{imports: imports, callbacks: map[string]bool{}, tainted: map[string]bool{}}
	for _, p := range fn.Type.Params.List {
		if _, ok := p.Type.(*ast.FuncType); ok {
			for _, name := range p.Names {
				fl.callbacks[name.Name] = true
			}
		}
	}
	exempt := map[*ast.FuncLit]bool{}
	ast.Inspect(fn.Body, func(n ast.Node) bool {
		if call, ok := n.(*ast.CallExpr); ok && (fl.isStoreCall(call) || fl.isLocalCall(call)) {
			for _, arg := range call.Args {
				if lit, ok := arg.(*ast.FuncLit); ok {
					exempt[lit] = true
				}
			}
		}
		return true
	})
	var raw []token.Pos
	// funcs is the stack of enclosing functions: their types, and whether
	// their returns are exempt.
	type frame struct {
		typ    *ast.FuncType
		exempt bool
	}
	funcs := []frame{{typ: fn.Type}}
	var stack []ast.Node
	ast.Inspect(fn.Body, func(n ast.Node) bool {
		if n == nil { // leaving a node: an assignment takes effect after its right-hand side
			switch n := stack[len(stack)-1].(type) {
			case *ast.FuncLit:
				funcs = funcs[:len(funcs)-1]
			case *ast.AssignStmt:
				fl.assign(n.Lhs, n.Rhs)
			case *ast.ValueSpec:
				lhs := make([]ast.Expr, len(n.Names))
				for i, name := range n.Names {
					lhs[i] = name
				}
				fl.assign(lhs, n.Values)
			}
			stack = stack[:len(stack)-1]
			return true
		}
		stack = append(stack, n)
		switch n := n.(type) {
		case *ast.FuncLit:
			funcs = append(funcs, frame{typ: n.Type, exempt: exempt[n] || funcs[len(funcs)-1].exempt})
		case *ast.ReturnStmt:
			top := funcs[len(funcs)-1]
			if top.exempt || !returnsError(top.typ) || len(n.Results) == 0 {
				break
			}
			if fl.isRaw(n.Results[len(n.Results)-1]) {
				raw = append(raw, n.Pos())
			}
		}
		return true
	})
	return raw
}

// assign records which of the assigned names now hold a store call's
// untranslated error: the last of several names assigned from one call,
// or a name assigned such a value one to one.
func (fl storeFlow) assign(lhs, rhs []ast.Expr) {
	if len(rhs) == 1 && len(lhs) > 1 {
		for _, l := range lhs {
			if id, ok := l.(*ast.Ident); ok {
				fl.tainted[id.Name] = false
			}
		}
		if id, ok := lhs[len(lhs)-1].(*ast.Ident); ok {
			fl.tainted[id.Name] = fl.isRaw(rhs[0])
		}
		return
	}
	for i, l := range lhs {
		if id, ok := l.(*ast.Ident); ok && i < len(rhs) {
			fl.tainted[id.Name] = fl.isRaw(rhs[i])
		}
	}
}

// isRaw reports whether e is a store call's error, untranslated: the call
// itself, a tainted name, or either wrapped by fmt.Errorf or joined.
func (fl storeFlow) isRaw(e ast.Expr) bool {
	switch e := ast.Unparen(e).(type) {
	case *ast.Ident:
		return fl.tainted[e.Name]
	case *ast.CallExpr:
		if fl.isStoreCall(e) {
			return true
		}
		if name := callName(e); name == "Errorf" || name == "Join" {
			return slices.ContainsFunc(e.Args, fl.isRaw)
		}
	}
	return false
}

// isStoreCall reports whether call is a function of package db, a store
// method (storeMethods) or a call of a callback, or forwards the results of
// one whole (f(db.GetTask(…)): a converter handing its error on).
func (fl storeFlow) isStoreCall(call *ast.CallExpr) bool {
	if len(call.Args) == 1 {
		if inner, ok := ast.Unparen(call.Args[0]).(*ast.CallExpr); ok && fl.isStoreCall(inner) {
			return true
		}
	}
	switch f := call.Fun.(type) {
	case *ast.Ident:
		return fl.callbacks[f.Name]
	case *ast.SelectorExpr:
		if pkg, ok := f.X.(*ast.Ident); ok && pkg.Name == "db" {
			return true
		}
		return slices.Contains(storeMethods, f.Sel.Name)
	}
	return false
}

// isLocalCall reports whether call is of a function or method of this
// module's (not of an imported package but db), which is checked itself.
func (fl storeFlow) isLocalCall(call *ast.CallExpr) bool {
	switch f := call.Fun.(type) {
	case *ast.Ident:
		return true
	case *ast.SelectorExpr:
		pkg, ok := f.X.(*ast.Ident)
		return !ok || !fl.imports[pkg.Name]
	}
	return false
}

func callName(call *ast.CallExpr) string {
	switch f := call.Fun.(type) {
	case *ast.Ident:
		return f.Name
	case *ast.SelectorExpr:
		return f.Sel.Name
	}
	return ""
}

// returnsError reports whether a function of type typ returns an error
// last.
func returnsError(typ *ast.FuncType) bool {
	if typ.Results == nil || len(typ.Results.List) == 0 {
		return false
	}
	id, ok := typ.Results.List[len(typ.Results.List)-1].Type.(*ast.Ident)
	return ok && id.Name == "error"
}
