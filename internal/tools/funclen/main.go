// Command funclen holds the house rule that no product function is longer
// than -max lines (80), counted from its func keyword to its closing brace.
// Product code is every .go file under the directory given (the module's
// root, "." by default) except tests (_test.go), generated files (a "Code
// generated ... DO NOT EDIT." header), the vendored go-zookeeper
// (zkclient/internal/zk) and the test machinery: integration, bench,
// examples, internal/testenv, internal/tools, internal/fuzztest,
// internal/apitest and internal/model; also testdata and hidden
// directories. It prints every function over the limit, longest first, as
// "lines path name", and exits 1 if there is one. Run it from the module's
// root:
//
//	go run ./internal/tools/funclen
package main

import (
	"cmp"
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// excluded are the directories, relative to the root, that hold no product
// code.
var excluded = []string{
	"zkclient/internal/zk",
	"integration",
	"bench",
	"examples",
	"internal/testenv",
	"internal/tools",
	"internal/fuzztest",
	"internal/apitest",
	"internal/model",
}

// function is one function declaration and its length in lines.
type function struct {
	lines int
	path  string
	name  string
}

func main() {
	limit := flag.Int("max", 80, "the most lines a product function may have")
	flag.Parse()
	root := "."
	if flag.NArg() > 0 {
		root = flag.Arg(0)
	}
	funcs, err := measure(root)
	if err != nil {
		fmt.Fprintln(os.Stderr, "funclen:", err)
		os.Exit(2)
	}
	var over []function
	for _, f := range funcs {
		if f.lines > *limit {
			over = append(over, f)
		}
	}
	if len(over) == 0 {
		return
	}
	slices.SortFunc(over, func(a, b function) int { return cmp.Compare(b.lines, a.lines) })
	fmt.Printf("product functions over %d lines (split them into named steps):\n", *limit)
	for _, f := range over {
		fmt.Printf("  %d %s %s\n", f.lines, f.path, f.name)
	}
	os.Exit(1)
}

// measure returns every function declared in the product code under root,
// with its path relative to root.
func measure(root string) ([]function, error) {
	var funcs []function
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			base := d.Name()
			if rel != "." && (strings.HasPrefix(base, ".") || strings.HasPrefix(base, "_") || base == "testdata" || slices.Contains(excluded, rel)) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(rel, ".go") || strings.HasSuffix(rel, "_test.go") {
			return nil
		}
		file, err := parser.ParseFile(fset, path, nil, parser.ParseComments)
		if err != nil {
			return err
		}
		if ast.IsGenerated(file) {
			return nil
		}
		for _, decl := range file.Decls {
			if fd, ok := decl.(*ast.FuncDecl); ok && fd.Body != nil {
				lines := fset.Position(fd.End()).Line - fset.Position(fd.Pos()).Line + 1
				funcs = append(funcs, function{lines: lines, path: rel, name: funcName(fd)})
			}
		}
		return nil
	})
	return funcs, err
}

// funcName names fd as Go does in stack traces: Recv.Name for a method.
func funcName(fd *ast.FuncDecl) string {
	if fd.Recv == nil || len(fd.Recv.List) == 0 {
		return fd.Name.Name
	}
	t := fd.Recv.List[0].Type
	for {
		switch x := t.(type) {
		case *ast.StarExpr:
			t = x.X
			continue
		case *ast.IndexExpr:
			t = x.X
			continue
		case *ast.IndexListExpr:
			t = x.X
			continue
		case *ast.Ident:
			return x.Name + "." + fd.Name.Name
		}
		return fd.Name.Name
	}
}
