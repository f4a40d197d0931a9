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
	"io/fs"
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

// pages are the Markdown files whose Go code must build: the README and
// every page under docs/.
func pages(t *testing.T) []string {
	t.Helper()
	out := []string{filepath.Join(root, "README.md")}
	err := filepath.WalkDir(filepath.Join(root, "docs"), func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".md") {
			out = append(out, p)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// snippet is one ```go block.
type snippet struct {
	file string
	line int // of the block's first code line
	code string
	// skip is the reason given by a <!-- fragment: ... --> comment right
	// before the block; the block is not built.
	skip string
	// context holds the declarations of a <!-- go-context ... --> comment
	// right before the block, which the block is built with.
	context     string
	contextLine int // of the context's first line
}

// extract returns the ```go blocks of a Markdown file, each with the HTML
// comment that precedes it (blank lines may come between).
func extract(t *testing.T, path string) []snippet {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	name := path // as errors name it: relative to the repository
	if rel, err := filepath.Rel(root, path); err == nil && !strings.HasPrefix(rel, "..") {
		name = filepath.ToSlash(rel)
	}
	var out []snippet
	var cur *snippet
	var comment []string // the last HTML comment's lines, while it applies
	commentLine := 0
	inComment := false
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		l := sc.Text()
		trim := strings.TrimSpace(l)
		switch {
		case cur != nil && trim == "```":
			out = append(out, *cur)
			cur = nil
		case cur != nil:
			cur.code += l + "\n"
		case inComment:
			comment = append(comment, l)
			inComment = !strings.Contains(l, "-->")
		case strings.HasPrefix(trim, "<!--"):
			comment, commentLine = []string{l}, n
			inComment = !strings.Contains(l, "-->")
		case trim == "```go":
			cur = &snippet{file: name, line: n + 1}
			applyComment(cur, comment, commentLine)
			comment = nil
		case trim != "":
			comment = nil
		}
	}
	return out
}

// applyComment reads a <!-- fragment: reason --> or <!-- go-context ... -->
// comment into s.
func applyComment(s *snippet, lines []string, first int) {
	if len(lines) == 0 {
		return
	}
	text := strings.Join(lines, "\n")
	text = strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(text), "<!--")), "-->"))
	switch {
	case strings.HasPrefix(text, "fragment"):
		s.skip = strings.TrimSpace(strings.TrimPrefix(strings.TrimPrefix(text, "fragment"), ":"))
		if s.skip == "" {
			s.skip = "marked as a fragment"
		}
	case strings.HasPrefix(text, "go-context"):
		// The declarations start on the line after "<!-- go-context".
		s.context = strings.Join(lines[1:len(lines)-1], "\n") + "\n"
		if last := strings.TrimSpace(lines[len(lines)-1]); last != "-->" {
			s.context += strings.TrimSuffix(last, "-->") + "\n"
		}
		s.contextLine = first + 1
	}
}

// packages maps a package name to its import path: this module's
// packages first, then the standard library's (so "tensor" is wfgen's, as
// in the docs). known holds every import path a snippet may import.
func packages(t *testing.T) (names map[string]string, known map[string]bool) {
	t.Helper()
	names, known = map[string]string{}, map[string]bool{}
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
			names[name] = path
			known[path] = true
		}
	}
	return names, known
}

// prepared is a snippet made into a Go file.
type prepared struct {
	snippet
	src     string
	imports []string
}

// prepare makes s a Go file: a snippet with a package clause is one as
// it is; any other is its imports, then the declarations of its
// go-context comment, then its code: declarations as they are,
// statements as the body of a function returning error. The imports are
// the snippet's own — less blank imports of packages that exist only in
// the reader's module (example.com/...), which add nothing to type
// checking — and those of this module's and the standard library's
// packages that its selectors name.
func prepare(s snippet, i int, names map[string]string, known map[string]bool) (prepared, error) {
	if strings.HasPrefix(strings.TrimSpace(stripComments(s.code)), "package ") {
		if s.context != "" {
			return prepared{}, fmt.Errorf("a whole file takes no go-context")
		}
		f, err := parser.ParseFile(token.NewFileSet(), "", s.code, parser.ImportsOnly)
		if err != nil {
			return prepared{}, err
		}
		var imports []string
		for _, im := range f.Imports {
			path := strings.Trim(im.Path.Value, `"`)
			if !known[path] {
				return prepared{}, fmt.Errorf("imports %s, which is neither this module's nor the standard library's: mark the block <!-- fragment: why -->", path)
			}
			imports = append(imports, path)
		}
		return prepared{s, "//line " + s.file + ":" + fmt.Sprint(s.line) + "\n" + s.code, imports}, nil
	}
	fset := token.NewFileSet()
	head, err := parser.ParseFile(fset, "", "package p\n"+s.code, parser.ImportsOnly)
	if err != nil {
		return prepared{}, err
	}
	body, bodyLine := s.code, s.line
	if n := len(head.Decls); n > 0 {
		end := fset.Position(head.Decls[n-1].End())
		body = s.code[end.Offset-len("package p\n"):]
		bodyLine = s.line + end.Line - 2
		// The rest of the last import's line stays with the imports.
		if nl := strings.IndexByte(body, '\n'); nl >= 0 {
			body, bodyLine = body[nl+1:], bodyLine+1
		}
	}
	own := map[string]string{} // name -> path of the snippet's imports
	var keep []*ast.ImportSpec
	for _, im := range head.Imports {
		path := strings.Trim(im.Path.Value, `"`)
		if !known[path] {
			if im.Name != nil && im.Name.Name == "_" {
				continue
			}
			return prepared{}, fmt.Errorf("imports %s, which is neither this module's nor the standard library's: mark the block <!-- fragment: why -->", path)
		}
		keep = append(keep, im)
		name := path[strings.LastIndex(path, "/")+1:]
		if im.Name != nil {
			name = im.Name.Name
		}
		own[name] = path
	}
	stmts := false
	if _, err := parser.ParseFile(token.NewFileSet(), "", "package p\n"+s.context+body, 0); err != nil {
		if _, err2 := parser.ParseFile(token.NewFileSet(), "", "package p\n"+s.context+"func _() error {\n"+body+"\nreturn nil\n}\n", 0); err2 != nil {
			return prepared{}, fmt.Errorf("the snippet is neither a file, declarations nor statements: %v", err)
		}
		stmts = true
	}
	var code strings.Builder
	if s.context != "" {
		fmt.Fprintf(&code, "//line %s:%d\n%s", s.file, s.contextLine, s.context)
	}
	if stmts {
		code.WriteString("func _() error {\n")
	}
	fmt.Fprintf(&code, "//line %s:%d\n%s", s.file, bodyLine, body)
	if stmts {
		code.WriteString("\nreturn nil\n}\n")
	}
	f, err := parser.ParseFile(token.NewFileSet(), "", "package p\n"+code.String(), 0)
	if err != nil {
		return prepared{}, err
	}
	declared := map[string]bool{}
	for _, d := range f.Decls {
		switch d := d.(type) {
		case *ast.FuncDecl:
			declared[d.Name.Name] = true
		case *ast.GenDecl:
			for _, sp := range d.Specs {
				switch sp := sp.(type) {
				case *ast.ValueSpec:
					for _, n := range sp.Names {
						declared[n.Name] = true
					}
				case *ast.TypeSpec:
					declared[sp.Name.Name] = true
				}
			}
		}
	}
	used := map[string]bool{}
	ast.Inspect(f, func(n ast.Node) bool {
		if sel, ok := n.(*ast.SelectorExpr); ok {
			if id, ok := sel.X.(*ast.Ident); ok && names[id.Name] != "" && own[id.Name] == "" && !declared[id.Name] {
				used[id.Name] = true
			}
		}
		return true
	})
	var b strings.Builder
	var imports []string
	fmt.Fprintf(&b, "package snippet%d\n\nimport (\n", i)
	for _, im := range keep {
		path := strings.Trim(im.Path.Value, `"`)
		if im.Name != nil {
			fmt.Fprintf(&b, "\t%s %q\n", im.Name.Name, path)
		} else {
			fmt.Fprintf(&b, "\t%q\n", path)
		}
		imports = append(imports, path)
	}
	keys := make([]string, 0, len(used))
	for k := range used {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(&b, "\t%q\n", names[k])
		imports = append(imports, names[k])
	}
	b.WriteString(")\n\n" + code.String())
	return prepared{s, b.String(), imports}, nil
}

// tolerated reports whether a type-checking error is one a snippet may
// have: a variable or import it shows but does not use further.
func tolerated(err error) bool {
	te, ok := err.(types.Error)
	return ok && te.Soft && (strings.Contains(te.Msg, "declared and not used") || strings.Contains(te.Msg, "imported and not used"))
}

// TestSnippetsBuild type-checks every Go snippet of the pages.
func TestSnippetsBuild(t *testing.T) {
	t.Parallel()
	names, known := packages(t)
	var all []snippet
	for _, p := range pages(t) {
		all = append(all, extract(t, p)...)
	}
	if len(all) < 10 {
		t.Fatalf("found %d Go snippets; the README and docs have more", len(all))
	}
	var ready []prepared
	need := map[string]bool{}
	for i, s := range all {
		if s.skip != "" {
			t.Logf("%s:%d: not built: %s", s.file, s.line, s.skip)
			continue
		}
		p, err := prepare(s, i, names, known)
		if err != nil {
			t.Errorf("%s:%d: %v", s.file, s.line, err)
			continue
		}
		for _, im := range p.imports {
			need[im] = true
		}
		ready = append(ready, p)
	}
	imp := exportImporter(t, need)
	for i, p := range ready {
		fset := token.NewFileSet()
		// The //line directives name the page; a parse name without a
		// folder keeps their relative paths as they are.
		f, err := parser.ParseFile(fset, fmt.Sprintf("snippet%d.go", i), p.src, parser.ParseComments)
		if err != nil {
			t.Errorf("%v", err)
			continue
		}
		var errs []error
		conf := types.Config{Importer: imp(fset), Error: func(err error) {
			if !tolerated(err) {
				errs = append(errs, err)
			}
		}}
		conf.Check(f.Name.Name, fset, []*ast.File{f}, nil)
		for _, err := range errs {
			t.Errorf("a Go snippet does not build: %v", err)
		}
	}
}

// TestSnippetForms checks that the test itself tells the forms apart and
// reports a snippet that does not build: a test that cannot fail would
// prove nothing about the docs.
func TestSnippetForms(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	page := filepath.Join(dir, "page.md")
	md := "# Page\n\n" +
		"<!-- fragment: shows a shape only -->\n```go\nthis is not Go\n```\n\n" +
		"<!-- go-context\nvar n int\n-->\n\n```go\nimport \"strconv\"\n\ns := strconv.Itoa(n)\n```\n\n" +
		"```go\nfunc f() string { return strings.ToUpper(\"x\") }\n```\n\n" +
		"```go\nx := strings.Repeat(\"x\", \"3\")\n```\n\n" +
		"```go\nimport _ \"example.com/you/models/all\"\n\nfmt.Println(1)\n```\n\n" +
		"```go\nimport \"example.com/you/models/encoder\"\n\nencoder.New()\n```\n"
	if err := os.WriteFile(page, []byte(md), 0o644); err != nil {
		t.Fatal(err)
	}
	got := extract(t, page)
	if len(got) != 6 {
		t.Fatalf("extracted %d snippets, want 6", len(got))
	}
	if got[0].skip != "shows a shape only" || got[1].context != "var n int\n" || got[1].contextLine != 9 || got[2].skip != "" || got[2].context != "" {
		t.Fatalf("comments read wrong: %+v", got[:3])
	}
	names := map[string]string{"strings": "strings", "strconv": "strconv", "fmt": "fmt"}
	known := map[string]bool{"strings": true, "strconv": true, "fmt": true}
	imp := exportImporter(t, map[string]bool{"strings": true, "strconv": true, "fmt": true})
	check := func(s snippet) []error {
		p, err := prepare(s, 0, names, known)
		if err != nil {
			return []error{err}
		}
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, "snippet.go", p.src, 0)
		if err != nil {
			return []error{err}
		}
		var errs []error
		conf := types.Config{Importer: imp(fset), Error: func(err error) {
			if !tolerated(err) {
				errs = append(errs, err)
			}
		}}
		conf.Check("p", fset, []*ast.File{f}, nil)
		return errs
	}
	for i, want := range []string{"", "", "cannot use \"3\"", "", "neither this module's nor the standard library's"} {
		errs := check(got[i+1])
		switch {
		case want == "" && len(errs) > 0:
			t.Errorf("snippet %d: %v", i+1, errs)
		case want != "" && (len(errs) == 0 || !strings.Contains(errs[0].Error(), want)):
			t.Errorf("snippet %d: errors %v, want one containing %q", i+1, errs, want)
		}
	}
	// The error of a statement snippet points at the page's line.
	if errs := check(got[3]); len(errs) == 0 || !strings.Contains(errs[0].Error(), "page.md:23:") {
		t.Errorf("error %v does not name page.md:23", errs)
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
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -export: %v\n%s", err, stderr.Bytes())
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
