package agent

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"
)

// maxParams is the most parameters a function of package agent takes.
const maxParams = 5

// TestFunctionsTakeFewParameters: no function of package agent (its
// non-test files) declares more than maxParams parameters. Counted are
// the declared parameters of every function and method declaration and
// of every function literal, each name once (a, b int is two; an unnamed
// one is one); a method's receiver is not counted, nor are results. A
// function that needs more is missing a type that holds them: the
// Agent's fields, or a struct of the inputs.
func TestFunctionsTakeFewParameters(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	checked := 0
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			var what string
			var typ *ast.FuncType
			switch fn := n.(type) {
			case *ast.FuncDecl:
				what, typ = fn.Name.Name, fn.Type
			case *ast.FuncLit:
				what, typ = "a function literal", fn.Type
			default:
				return true
			}
			checked++
			if k := countParams(typ.Params); k > maxParams {
				t.Errorf("%s: %s takes %d parameters, more than %d", fset.Position(n.Pos()), what, k, maxParams)
			}
			return true
		})
	}
	if checked == 0 {
		t.Fatal("no function found: the test reads the wrong directory")
	}
}

// countParams counts the parameters a field list declares.
func countParams(fl *ast.FieldList) int {
	if fl == nil {
		return 0
	}
	n := 0
	for _, f := range fl.List {
		n += max(len(f.Names), 1)
	}
	return n
}
