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

	"github.com/worldfoundry/wfgen/gen/docs"
	"github.com/worldfoundry/wfgen/gen/emit"
	"github.com/worldfoundry/wfgen/gen/ir"
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
	for _, p := range inputs {
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
	conf := types.Config{Importer: exportImporter(t, fset)}
	if _, err := conf.Check(fam.Package, fset, []*ast.File{file}, nil); err != nil {
		t.Fatalf("validate accepted a manifest whose generated code does not compile: %v", err)
	}
	if _, err := docs.Render(fam); err != nil {
		t.Fatalf("docs failure on a valid manifest: %v", err)
	}
}

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
			ir.RuntimePath, ir.ClientPath, ir.BatchPath, ir.StreamPath, ir.ParamsPath, ir.EnumPath, ir.RemotePath, ir.PixelsPath,
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
	want := map[string]string{
		"bad-field-validate.yaml": `task "run" field "validate" both become the Go name Validate`,
		"bad-task-close.yaml":     `the Client method Close and task "close" both become the Go name Close`,
		"bad-task-versions.yaml":  `task "1.3b" and task "x1.3b" both become the Go name X1_3B`,
		"bad-long-id.yaml":        "is 255 characters long, more than 128",
		"bad-long-package.yaml":   "is 255 characters long, more than 128",
	}
	paths, _ := filepath.Glob(filepath.Join("testdata", "trust", "*.yaml"))
	if len(paths) < 10 {
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
