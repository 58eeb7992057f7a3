package seqzk

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// zkWrites are the methods of zkclient.Client and zkclient.Session that
// write a znode's data or existence. SetACL (an ACL, not data) and
// EnsurePath (the empty parents of a path) are not among them.
var zkWrites = []string{"Create", "CreateWithACL", "Set", "Delete", "Multi"}

// zkWriteCalls returns "file:line call" for every call in file of a
// ZooKeeper write method on a handle: an expression that names a zk field
// or client, or a session (c.zk.Session(), or a variable assigned one).
func zkWriteCalls(fset *token.FileSet, file *ast.File) []string {
	sessions := map[string]bool{}
	var found []string
	ast.Inspect(file, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.AssignStmt:
			for i, rhs := range n.Rhs {
				if c, ok := rhs.(*ast.CallExpr); ok && i < len(n.Lhs) && strings.HasSuffix(render(c.Fun), ".Session") {
					if id, ok := n.Lhs[i].(*ast.Ident); ok {
						sessions[id.Name] = true
					}
				}
			}
		case *ast.CallExpr:
			sel, ok := n.Fun.(*ast.SelectorExpr)
			if !ok || !slices.Contains(zkWrites, sel.Sel.Name) {
				return true
			}
			recv := render(sel.X)
			id, isIdent := sel.X.(*ast.Ident)
			if strings.Contains(strings.ToLower(recv), "zk") || strings.HasSuffix(recv, ".Session()") || isIdent && sessions[id.Name] {
				found = append(found, fset.Position(n.Pos()).String()+" "+recv+"."+sel.Sel.Name)
			}
		}
		return true
	})
	return found
}

// render spells the selector chains and calls the check looks at; any
// other expression is "?".
func render(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.Ident:
		return e.Name
	case *ast.SelectorExpr:
		return render(e.X) + "." + e.Sel.Name
	case *ast.CallExpr:
		return render(e.Fun) + "()"
	case *ast.ParenExpr:
		return render(e.X)
	case *ast.StarExpr:
		return render(e.X)
	}
	return "?"
}

// TestEveryZnodeWriteGoesThroughTheEngine holds the house rule that every
// write of a znode this module's product code makes goes through
// Client.write, the one place that sends, counts, learns the epoch and
// classifies a write's failure. The election package writes only its own
// candidates' znodes, and zkclient is the client itself.
func TestEveryZnodeWriteGoesThroughTheEngine(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	skip := []string{"zkclient", "election", "integration", "bench", "examples", "internal/testenv", "internal/model",
		"internal/tools", "internal/fuzztest", "internal/apitest"}
	fset := token.NewFileSet()
	var around []string
	files := 0
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if d.IsDir() {
			if slices.Contains(skip, rel) || d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".") && rel != "." {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, p, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		files++
		calls := zkWriteCalls(fset, f)
		if rel == filepath.Join("internal", "seqzk", "write.go") {
			if len(calls) != 1 {
				t.Errorf("write.go makes %d ZooKeeper writes, want the engine's one: %v", len(calls), calls)
			}
			return nil
		}
		around = append(around, calls...)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 100 {
		t.Fatalf("read %d product files under %s: the walk missed the module", files, root)
	}
	for _, c := range around {
		t.Errorf("a ZooKeeper write around the engine (use Client.write): %s", c)
	}
}

// TestTheEngineCheckFindsWritesAroundIt shows that the check above can
// fail: each kind of handle writing around the engine is found.
func TestTheEngineCheckFindsWritesAroundIt(t *testing.T) {
	const src = `package seqzk
func (c *Client) around(ctx context.Context) {
	c.zk.Set(ctx, "/a", nil, 0)
	c.zk.Session().Delete(ctx, "/a", 0)
	s := c.zk.Session()
	s.Multi(ctx)
	zk.Create(ctx, "/a", nil, 0)
	h.Set("k", "v")   // not ZooKeeper
	m.Delete("k")     // not ZooKeeper
	c.zk.SetACL(ctx, "/a", nil, 0) // an ACL, not data
}`
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "around.go", src, parser.SkipObjectResolution)
	if err != nil {
		t.Fatal(err)
	}
	got := zkWriteCalls(fset, f)
	want := []string{"c.zk.Set", "c.zk.Session().Delete", "s.Multi", "zk.Create"}
	if len(got) != len(want) {
		t.Fatalf("found %v, want %v", got, want)
	}
	for i, w := range want {
		if !strings.HasSuffix(got[i], " "+w) {
			t.Errorf("call %d: found %s, want %s", i, got[i], w)
		}
	}
}
