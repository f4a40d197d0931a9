package emit_test

import (
	"bytes"
	"go/format"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"testing"

	"github.com/worldfoundry/wfgen/gen/docs"
	"github.com/worldfoundry/wfgen/gen/emit"
	"github.com/worldfoundry/wfgen/gen/manifest"
	"github.com/worldfoundry/wfgen/gen/validate"
)

// FuzzGenerate feeds arbitrary manifests through validation and the
// generator: it must never panic, and whatever it emits must be gofmt'd Go
// that parses, starting with the one-line header.
func FuzzGenerate(f *testing.F) {
	inputs, _ := filepath.Glob(filepath.Join(goldenRoot, "*", "input", "*.yaml"))
	for _, p := range inputs {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(b)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		file, diags := validate.Bytes("fuzz.yaml", data)
		if file == nil || len(diags) > 0 {
			return
		}
		files, diags, err := emit.Generate([]*manifest.File{file})
		if err != nil {
			t.Fatalf("generator failure on a valid manifest: %v", err)
		}
		if len(diags) > 0 {
			return
		}
		for p, src := range files {
			if !bytes.HasPrefix(src, []byte(emit.Header("fuzz.yaml")+"\n")) {
				t.Fatalf("%s: header missing", p)
			}
			if _, err := parser.ParseFile(token.NewFileSet(), p, src, parser.ParseComments); err != nil {
				t.Fatalf("%s does not parse: %v\n%s", p, err, src)
			}
			if fmtd, err := format.Source(src); err != nil || !bytes.Equal(fmtd, src) {
				t.Fatalf("%s is not gofmt'd", p)
			}
		}
		if _, _, err := docs.Generate([]*manifest.File{file}); err != nil {
			t.Fatalf("docs failure on a valid manifest: %v", err)
		}
	})
}
