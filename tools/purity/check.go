package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"slices"
	"strconv"
)

// forbiddenImports is docs/design.md §2's one list: I/O, concurrency, randomness, logging and
// unsafe memory. "C" is cgo.
var forbiddenImports = []string{
	"C", "crypto/rand", "io/fs", "log", "log/slog", "math/rand", "math/rand/v2",
	"net", "os", "sync", "sync/atomic", "syscall", "unsafe",
}

// forbiddenTime are the functions of package time that read the clock or start timers.
// Importing time for its types and arithmetic on values passed in is allowed.
var forbiddenTime = []string{"After", "AfterFunc", "NewTicker", "NewTimer", "Now", "Since", "Sleep", "Tick", "Until"}

// Violation is one breach of the purity rule.
type Violation struct {
	Pos  token.Position
	What string
}

func forbiddenImport(path string) bool {
	if slices.Contains(forbiddenImports, path) {
		return true
	}
	// net/... and os/... are forbidden as whole trees.
	for _, tree := range []string{"net/", "os/"} {
		if len(path) > len(tree) && path[:len(tree)] == tree {
			return true
		}
	}
	return false
}

// checkFiles parses the given Go files of one package and reports forbidden imports,
// clock reads and goroutines.
func checkFiles(dir string, files []string) ([]Violation, error) {
	fset := token.NewFileSet()
	var out []Violation
	for _, name := range files {
		f, err := parser.ParseFile(fset, filepath.Join(dir, name), nil, parser.SkipObjectResolution)
		if err != nil {
			return nil, err
		}
		timeNames := map[string]bool{}
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			if forbiddenImport(path) {
				out = append(out, Violation{fset.Position(imp.Pos()), "imports " + path})
			}
			if path == "time" {
				local := "time"
				if imp.Name != nil {
					local = imp.Name.Name
				}
				timeNames[local] = true
			}
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.GoStmt:
				out = append(out, Violation{fset.Position(n.Pos()), "starts a goroutine"})
			case *ast.SelectorExpr:
				if id, ok := n.X.(*ast.Ident); ok && timeNames[id.Name] && slices.Contains(forbiddenTime, n.Sel.Name) {
					out = append(out, Violation{fset.Position(n.Pos()), "reads the clock: time." + n.Sel.Name})
				}
			}
			return true
		})
	}
	return out, nil
}
