//go:build cgo

package e2e_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/worldfoundry/wfgen/examples/tinymodels"
)

// snippetMain wraps the Go usage snippet of a docs page into a program.
const snippetMain = `package main

import (
	"context"
	"fmt"
	"os"

	"example.com/e2e/models/PKG"
	"github.com/worldfoundry/wfgen/runtime/tensor"
	_ "github.com/worldfoundry/wfgen/runtime/torch"
)

var _ = tensor.Zeros

func run(ctx context.Context) error {
SNIPPET
	_ = res
	return err
}

func main() {
	if err := run(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println("ok")
}
`

var goBlock = regexp.MustCompile("(?s)## Go usage\n\n```go\n(.*?)```")

// The Go usage snippet of every generated docs page compiles, and for the
// tiny families, whose checkpoints the tests can build, it runs against
// real libtorch: required fields are set to values that pass Validate.
func TestDocsSnippetsCompileAndRun(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a module and programs; skipped with -short")
	}
	root := repoRoot(t)
	dir := t.TempDir()
	must(t, os.MkdirAll(filepath.Join(dir, "manifests"), 0o755))
	entries, err := os.ReadDir(filepath.Join(root, "manifests"))
	must(t, err)
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".yaml") {
			b, err := os.ReadFile(filepath.Join(root, "manifests", e.Name()))
			must(t, err)
			must(t, os.WriteFile(filepath.Join(dir, "manifests", e.Name()), b, 0o644))
		}
	}
	gomod := "module example.com/e2e\n\ngo 1.26\n\nrequire github.com/worldfoundry/wfgen v0.0.0\n\nreplace github.com/worldfoundry/wfgen => " + root + "\n"
	must(t, os.WriteFile(filepath.Join(dir, "go.mod"), []byte(gomod), 0o644))
	sum, err := os.ReadFile(filepath.Join(root, "go.sum"))
	must(t, err)
	must(t, os.WriteFile(filepath.Join(dir, "go.sum"), sum, 0o644))

	wfgen := filepath.Join(dir, "wfgen")
	run(t, root, "go", "build", "-o", wfgen, "./cmd/wfgen")
	run(t, dir, wfgen, "generate", "-o", "models", "manifests")
	run(t, dir, wfgen, "docs", "-o", "pages", "manifests")
	pages, err := filepath.Glob(filepath.Join(dir, "pages", "*.md"))
	must(t, err)
	if len(pages) < 6 {
		t.Fatalf("want a page per manifest, got %v", pages)
	}
	for _, page := range pages {
		b, err := os.ReadFile(page)
		must(t, err)
		m := goBlock.FindSubmatch(b)
		if m == nil {
			t.Fatalf("%s has no Go usage block", page)
		}
		pkg := strings.TrimSuffix(filepath.Base(page), ".md")
		src := strings.ReplaceAll(snippetMain, "PKG", pkg)
		src = strings.Replace(src, "SNIPPET", "\t"+strings.ReplaceAll(strings.TrimSpace(string(m[1])), "\n", "\n\t"), 1)
		must(t, os.MkdirAll(filepath.Join(dir, "cmd", pkg), 0o755))
		must(t, os.WriteFile(filepath.Join(dir, "cmd", pkg, "main.go"), []byte(src), 0o644))
	}
	run(t, dir, "go", "vet", "./cmd/...")

	ckpts := filepath.Join(dir, "root", "checkpoints")
	must(t, os.MkdirAll(ckpts, 0o755))
	must(t, tinymodels.BuildEncoder(filepath.Join(ckpts, "tiny-encoder.pt")))
	must(t, tinymodels.BuildWorld(filepath.Join(ckpts, "tiny-world.pt")))
	t.Setenv("WORLDFOUNDRY_CHECKPOINT_ROOT", filepath.Join(dir, "root"))
	for _, pkg := range []string{"tinyencoder", "tinyworld"} {
		if out := run(t, dir, "go", "run", "./cmd/"+pkg); !strings.Contains(out, "ok") {
			t.Errorf("%s snippet printed %q", pkg, out)
		}
	}
}
