package emit_test

import (
	"bytes"
	"encoding/json"
	"go/ast"
	"go/format"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"unicode"

	"github.com/worldfoundry/wfgen/gen/docs"
	"github.com/worldfoundry/wfgen/gen/emit"
	"github.com/worldfoundry/wfgen/gen/ir"
	"github.com/worldfoundry/wfgen/gen/naming"
	"github.com/worldfoundry/wfgen/gen/validate"
)

// FuzzValidateGenerate asserts that validate and generate agree: whatever
// manifest "wfgen validate" accepts, the generator renders into gofmt'd Go
// that parses, starts with the one-line header and type-checks against the
// runtime packages, and the docs renderer renders too. The corpus holds the
// golden inputs and the hostile cases of the trust issue
// (testdata/fuzz/FuzzValidateGenerate).
func FuzzValidateGenerate(f *testing.F) {
	inputs, _ := filepath.Glob(filepath.Join(goldenRoot, "*", "input", "*.yaml"))
	trust, _ := filepath.Glob(filepath.Join("testdata", "trust", "*.yaml"))
	for _, p := range append(inputs, trust...) {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(b)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		fam, diags := validate.Bytes("fuzz.yaml", data)
		if fam == nil || len(diags) > 0 {
			return
		}
		checkRenders(t, fam)
	})
}

// checkRenders renders a valid family and checks the Go and the docs.
func checkRenders(t *testing.T, fam *ir.Family) {
	t.Helper()
	src, err := emit.GoSource(fam)
	if err != nil {
		t.Fatalf("validate accepted a manifest that generate cannot render: %v", err)
	}
	p := emit.GoPath(fam)
	if !bytes.HasPrefix(src, []byte(emit.Header(fam.File.OriginPath())+"\n")) {
		t.Fatalf("%s: header missing", p)
	}
	fset := token.NewFileSet()
	file, err := parser.ParseFile(fset, p, src, parser.ParseComments)
	if err != nil {
		t.Fatalf("%s does not parse: %v\n%s", p, err, src)
	}
	if fmtd, err := format.Source(src); err != nil || !bytes.Equal(fmtd, src) {
		t.Fatalf("%s is not gofmt'd", p)
	}
	imp := exportImporter(t, fset)
	conf := types.Config{Importer: imp}
	pkg, err := conf.Check(fam.Package, fset, []*ast.File{file}, nil)
	if err != nil {
		t.Fatalf("validate accepted a manifest whose generated code does not compile: %v", err)
	}
	checkImportable(t, fset, pkg, imp)
	if i := strings.IndexFunc(string(src), func(r rune) bool { return unicode.In(r, unicode.Cf, unicode.Zl, unicode.Zp) }); i >= 0 {
		t.Fatalf("%s holds an invisible character (bidi control, zero-width or separator) at byte %d; text copied into Go is escaped", p, i)
	}
	if _, err := docs.Render(fam); err != nil {
		t.Fatalf("docs failure on a valid manifest: %v", err)
	}
}

// checkImportable type-checks a second package that imports pkg by its
// own name and uses it, as a user's program would: a generated package
// must not only compile but be importable (a package named init compiles
// and vets, and no program can import it).
func checkImportable(t *testing.T, fset *token.FileSet, pkg *types.Package, imp types.Importer) {
	t.Helper()
	use := "var _ = "
	for _, n := range pkg.Scope().Names() {
		if token.IsExported(n) {
			if _, isType := pkg.Scope().Lookup(n).(*types.TypeName); isType {
				use = "var _ *"
			}
			use += pkg.Name() + "." + n
			break
		}
	}
	const path = "example.com/generated/fam"
	src := "package user\n\nimport \"" + path + "\"\n\n" + use + "\n"
	f, err := parser.ParseFile(fset, "user.go", src, 0)
	if err != nil {
		t.Fatal(err)
	}
	conf := types.Config{Importer: importerFunc(func(p string) (*types.Package, error) {
		if p == path {
			return pkg, nil
		}
		return imp.Import(p)
	})}
	if _, err := conf.Check("example.com/user", fset, []*ast.File{f}, nil); err != nil {
		t.Fatalf("validate accepted a manifest whose generated package cannot be imported: %v\n%s", err, src)
	}
}

// importerFunc is a types.Importer made of a function.
type importerFunc func(path string) (*types.Package, error)

func (f importerFunc) Import(path string) (*types.Package, error) { return f(path) }

var (
	exportOnce  sync.Once
	exportFiles map[string]string // import path -> export data file
	exportErr   error
)

// exportImporter returns an importer reading the compiler's export data
// of the packages generated code imports (and their dependencies), which
// "go list -export" builds once.
func exportImporter(t *testing.T, fset *token.FileSet) types.Importer {
	t.Helper()
	exportOnce.Do(func() {
		cmd := exec.Command("go", "list", "-export", "-deps", "-json=ImportPath,Export",
			ir.SpecPath, ir.TensorPath, ir.ClientPath, ir.BatchPath, ir.StreamPath, ir.ParamsPath, ir.EnumPath, ir.PixelsPath,
			"context", "encoding/json", "fmt", "image")
		out, err := cmd.Output()
		if err != nil {
			exportErr = err
			return
		}
		exportFiles = map[string]string{}
		dec := json.NewDecoder(bytes.NewReader(out))
		for dec.More() {
			var p struct{ ImportPath, Export string }
			if err := dec.Decode(&p); err != nil {
				exportErr = err
				return
			}
			exportFiles[p.ImportPath] = p.Export
		}
	})
	if exportErr != nil {
		t.Fatalf("go list -export: %v", exportErr)
	}
	return importer.ForCompiler(fset, "gc", func(path string) (io.ReadCloser, error) {
		f, ok := exportFiles[path]
		if !ok {
			return nil, os.ErrNotExist
		}
		return os.Open(f)
	})
}

// TestTrustCases holds the cases where validate and generate disagreed
// (issue: trust): each ok-* manifest validates and renders into Go that
// type-checks; each bad-* manifest is refused by validate with a message
// naming the problem.
func TestTrustCases(t *testing.T) {
	t.Parallel()
	want := map[string]string{
		"bad-field-validate.yaml": `task "run" field "validate" both become the Go name Validate`,
		"bad-task-close.yaml":     `the Client method Close and task "close" both become the Go name Close`,
		"bad-task-versions.yaml":  `task "1.3b" and task "x1.3b" both become the Go name X1_3B`,
		"bad-long-id.yaml":        "is 255 characters long, more than 128",
		"bad-long-package.yaml":   "is 255 characters long, more than 128",
		// issue 32: names fold to ASCII, so look-alike ids collide.
		"bad-confusable-choices.yaml": `choice "file" and task "run" field "style" choice "ﬁle" both become the Go name RunStyleFile`,
		"bad-confusable-accents.yaml": `both become the Go name RunStyleEte`,
		"bad-shape-float.yaml":        `shape[0] is 1e+30, which is not a dimension`,
		"bad-nan-choice.yaml":         `number .nan is not a finite number`,
	}
	paths, _ := filepath.Glob(filepath.Join("testdata", "trust", "*.yaml"))
	if len(paths) < 16 {
		t.Fatalf("want the trust cases, found %v", paths)
	}
	for _, p := range paths {
		name := filepath.Base(p)
		t.Run(name, func(t *testing.T) {
			fam, diags, err := validate.File(p)
			if err != nil {
				t.Fatal(err)
			}
			if msg, bad := want[name]; bad {
				if fam != nil || len(diags) == 0 || !strings.Contains(diags[0].Message, msg) {
					t.Fatalf("validate = %v; want a diagnostic containing %q", diags, msg)
				}
				return
			}
			if len(diags) > 0 {
				t.Fatalf("validate rejects it: %v", diags)
			}
			checkRenders(t, fam)
		})
	}
}

// Every package generated code imports has a name that naming reserves,
// so that no family package takes it (issue 32: a family named like an
// import of its own code could not be imported beside it).
func TestReservedNamesCoverGeneratedImports(t *testing.T) {
	t.Parallel()
	files, _ := filepath.Glob(filepath.Join("..", "..", "generated", "*", "*.go"))
	golden, _ := filepath.Glob(filepath.Join(goldenRoot, "*", "output", "*", "*.go"))
	files = append(files, golden...)
	if len(files) < 5 {
		t.Fatalf("found only %v", files)
	}
	seen := map[string]bool{}
	for _, p := range files {
		if strings.HasSuffix(p, "_test.go") {
			continue // the goldens' own tests, not generated
		}
		f, err := parser.ParseFile(token.NewFileSet(), p, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range f.Imports {
			path := strings.Trim(imp.Path.Value, `"`)
			name := path[strings.LastIndexByte(path, '/')+1:]
			if seen[name] || strings.HasPrefix(path, "github.com/worldfoundry/wfgen/generated/") {
				continue
			}
			seen[name] = true
			if err := naming.CheckPackage(name); err == nil {
				t.Errorf("%s imports %s, whose name %s a family package may take", p, path, name)
			}
		}
	}
}
