package docsnippets

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
)

// root is the repository's top folder.
var root = filepath.Join("..", "..")

// pages are the Markdown files whose Go code must build.
func pages(t *testing.T) []string {
	return []string{filepath.Join(root, "README.md")}
}

// snippet is one ```go block.
type snippet struct {
	file string
	line int // of the block's first code line
	code string
}

// extract returns the ```go blocks of a Markdown file.
func extract(t *testing.T, path string) []snippet {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []snippet
	var cur *snippet
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		l := sc.Text()
		switch {
		case cur == nil && strings.TrimSpace(l) == "```go":
			cur = &snippet{file: path, line: n + 1}
		case cur != nil && strings.TrimSpace(l) == "```":
			out = append(out, *cur)
			cur = nil
		case cur != nil:
			cur.code += l + "\n"
		}
	}
	return out
}

// packages maps a package name to its import path: this module's
// packages first, then the standard library's (so "runtime" is wfgen's,
// as in the docs).
func packages(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, pattern := range []string{"std", "github.com/worldfoundry/wfgen/..."} {
		cmd := exec.Command("go", "list", "-e", "-f", "{{.Name}} {{.ImportPath}}", pattern)
		cmd.Dir = root
		b, err := cmd.Output()
		if err != nil {
			t.Fatalf("go list %s: %v", pattern, err)
		}
		for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			name, path, _ := strings.Cut(l, " ")
			if strings.Contains(path, "/internal") || strings.HasPrefix(path, "internal/") || strings.Contains(path, "vendor/") || name == "main" {
				continue
			}
			out[name] = path
		}
	}
	return out
}

// TestSnippetsBuild type-checks every Go snippet of the pages.
func TestSnippetsBuild(t *testing.T) {
	names := packages(t)
	var all []snippet
	for _, p := range pages(t) {
		all = append(all, extract(t, p)...)
	}
	if len(all) == 0 {
		t.Fatal("no Go snippets found")
	}
	type prepared struct {
		snippet
		src     string
		imports []string
	}
	var ready []prepared
	need := map[string]bool{}
	for i, s := range all {
		src := s.code
		var imports []string
		if !strings.HasPrefix(strings.TrimSpace(stripComments(src)), "package ") {
			f, err := parser.ParseFile(token.NewFileSet(), "", "package p\n"+src, 0)
			if err != nil {
				t.Errorf("%s:%d: the snippet is neither a file nor declarations: %v", s.file, s.line, err)
				continue
			}
			used := map[string]bool{}
			ast.Inspect(f, func(n ast.Node) bool {
				if sel, ok := n.(*ast.SelectorExpr); ok {
					if id, ok := sel.X.(*ast.Ident); ok && names[id.Name] != "" {
						used[id.Name] = true
					}
				}
				return true
			})
			var b strings.Builder
			fmt.Fprintf(&b, "package snippet%d\n\nimport (\n", i)
			keys := make([]string, 0, len(used))
			for k := range used {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for _, k := range keys {
				fmt.Fprintf(&b, "\t%q\n", names[k])
				imports = append(imports, names[k])
			}
			b.WriteString(")\n\n//line " + s.file + ":" + fmt.Sprint(s.line) + "\n" + src)
			src = b.String()
		} else {
			f, err := parser.ParseFile(token.NewFileSet(), "", src, parser.ImportsOnly)
			if err != nil {
				t.Errorf("%s:%d: %v", s.file, s.line, err)
				continue
			}
			for _, im := range f.Imports {
				imports = append(imports, strings.Trim(im.Path.Value, `"`))
			}
			src = "//line " + s.file + ":" + fmt.Sprint(s.line) + "\n" + src
		}
		for _, p := range imports {
			need[p] = true
		}
		ready = append(ready, prepared{s, src, imports})
	}
	imp := exportImporter(t, need)
	for _, p := range ready {
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, p.file, p.src, parser.ParseComments)
		if err != nil {
			t.Errorf("%v", err)
			continue
		}
		conf := types.Config{Importer: imp(fset)}
		if _, err := conf.Check(f.Name.Name, fset, []*ast.File{f}, nil); err != nil {
			t.Errorf("a Go snippet does not build: %v", err)
		}
	}
}

// stripComments drops the comment lines that may precede a package clause.
func stripComments(src string) string {
	var keep []string
	for _, l := range strings.Split(src, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(l), "//") {
			keep = append(keep, l)
		}
	}
	return strings.Join(keep, "\n")
}

// exportImporter returns importers that read the compiler's export data of
// the given packages and their dependencies ("go list -export" builds it).
func exportImporter(t *testing.T, paths map[string]bool) func(*token.FileSet) types.Importer {
	t.Helper()
	args := []string{"list", "-export", "-deps", "-json=ImportPath,Export"}
	for p := range paths {
		args = append(args, p)
	}
	slices.Sort(args[4:])
	cmd := exec.Command("go", args...)
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -export: %v", err)
	}
	files := map[string]string{}
	dec := json.NewDecoder(bytes.NewReader(out))
	for dec.More() {
		var p struct{ ImportPath, Export string }
		if err := dec.Decode(&p); err != nil {
			t.Fatal(err)
		}
		files[p.ImportPath] = p.Export
	}
	return func(fset *token.FileSet) types.Importer {
		return importer.ForCompiler(fset, "gc", func(path string) (io.ReadCloser, error) {
			f, ok := files[path]
			if !ok {
				return nil, fmt.Errorf("%s: not a dependency of the snippets", path)
			}
			return os.Open(f)
		})
	}
}
