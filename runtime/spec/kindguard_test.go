package spec

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// specImport is this package's import path.
const specImport = "github.com/worldfoundry/wfgen/runtime/spec"

// kindSwitchAllowed are the files outside this package that still decide
// by naming a kind, with how many times: none. An entry is for a file that
// cannot ask the kind's row yet, and goes when it can.
var kindSwitchAllowed = map[string]int{}

// TestNoKindSwitchesOutsideSpec fails when code outside this package
// decides by naming kinds: a case clause, an == or != operand, or a map
// key that is one of the kind constants (KindInt, ArtifactVideo, ...,
// under whatever name the file imports this package). Such code asks the
// kind's row instead (Kind.Base, IsList, Picture, ArtifactKind.Holds, ...),
// so that adding a kind stays adding its row. Building a value with a kind
// (Kind: spec.KindInt), tests, generated code and golden outputs are not
// checked.
func TestNoKindSwitchesOutsideSpec(t *testing.T) {
	consts := map[string]bool{}
	for _, r := range kindTable {
		consts[r.Const] = true
	}
	for _, r := range artifactTable {
		consts[r.Const] = true
	}
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("module root: %v", err)
	}
	found := map[string][]string{}
	files := 0
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel := filepath.ToSlash(strings.TrimPrefix(path, root+string(filepath.Separator)))
		if d.IsDir() {
			switch {
			case path == root:
				return nil
			case strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || d.Name() == "node_modules",
				rel == "runtime/spec", rel == "generated", rel == "golden":
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		files++
		sites, err := kindSwitches(path, consts)
		if err != nil {
			return err
		}
		if len(sites) > 0 {
			found[rel] = sites
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 100 {
		t.Fatalf("walked %d Go files under %s; expected the whole module", files, root)
	}
	for _, rel := range slices.Sorted(maps.Keys(found)) {
		if n, ok := kindSwitchAllowed[rel]; ok && len(found[rel]) <= n {
			continue
		}
		for _, s := range found[rel] {
			t.Errorf("%s:%s decides by naming a kind; ask its row (spec.Kind.Info, Base, IsList, Picture, spec.ArtifactKind.Holds, ...) instead", rel, s)
		}
	}
	for rel, n := range kindSwitchAllowed {
		if len(found[rel]) < n {
			t.Errorf("%s no longer names kinds %d time(s) (found %d): lower or remove its kindSwitchAllowed entry", rel, n, len(found[rel]))
		}
	}
}

// kindSwitches returns the positions ("LINE:COL") in the Go file at path
// where a kind constant of this package is a case, an == or != operand or
// a composite literal key.
func kindSwitches(path string, consts map[string]bool) ([]string, error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
	if err != nil {
		return nil, err
	}
	local := ""
	for _, im := range f.Imports {
		if p, _ := strconv.Unquote(im.Path.Value); p == specImport {
			local = "spec"
			if im.Name != nil {
				local = im.Name.Name
			}
		}
	}
	if local == "" || local == "_" {
		return nil, nil
	}
	isKind := func(e ast.Expr) bool {
		sel, ok := ast.Unparen(e).(*ast.SelectorExpr)
		if !ok {
			return false
		}
		x, ok := sel.X.(*ast.Ident)
		return ok && x.Name == local && consts[sel.Sel.Name]
	}
	var sites []string
	at := func(n ast.Node) {
		p := fset.Position(n.Pos())
		sites = append(sites, fmt.Sprintf("%d:%d", p.Line, p.Column))
	}
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.CaseClause:
			for _, e := range n.List {
				if isKind(e) {
					at(e)
				}
			}
		case *ast.BinaryExpr:
			if (n.Op == token.EQL || n.Op == token.NEQ) && (isKind(n.X) || isKind(n.Y)) {
				at(n)
			}
		case *ast.KeyValueExpr:
			if isKind(n.Key) {
				at(n)
			}
		}
		return true
	})
	return sites, nil
}
