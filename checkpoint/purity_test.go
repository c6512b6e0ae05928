package checkpoint

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestPurity enforces docs/DESIGN.md section 3: the protocol core is a pure state
// machine. Its non-test files never read the clock or wait on it, and start
// no goroutine. (Its imports are checked by internal/layout.)
func TestPurity(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		checked++
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.GoStmt:
				t.Errorf("%s starts a goroutine: the protocol core is single-threaded", fset.Position(n.Pos()))
			case *ast.SelectorExpr:
				if x, ok := n.X.(*ast.Ident); ok && x.Name == "time" {
					switch n.Sel.Name {
					case "Now", "Sleep", "After", "AfterFunc", "Tick", "NewTimer", "NewTicker", "Since", "Until":
						t.Errorf("%s calls time.%s: time is an input (Tick), never read", fset.Position(n.Pos()), n.Sel.Name)
					}
				}
			}
			return true
		})
	}
	if checked == 0 {
		t.Fatal("no source files checked")
	}
	if _, err := os.Stat("coordinator.go"); err != nil {
		t.Fatalf("run from the package directory: %v", err)
	}
}
