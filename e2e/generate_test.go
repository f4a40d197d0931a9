//go:build cgo

package e2e_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/worldfoundry/wfgen/examples/tinymodels"
	"github.com/worldfoundry/wfgen/runtime/torch"

	"github.com/worldfoundry/wfgen/runtime/engine"
	"github.com/worldfoundry/wfgen/runtime/tensor"
)

// program uses the generated tiny-encoder client the way a user would.
const program = `package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"

	"example.com/e2e/models/tinyencoder"
	"github.com/worldfoundry/wfgen/runtime/tensor"
	"github.com/worldfoundry/wfgen/runtime/client"
	_ "github.com/worldfoundry/wfgen/runtime/torch"
)

func main() {
	c, err := tinyencoder.New(client.WithCheckpointPath(os.Args[1]))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	defer c.Close()
	var ps []tinyencoder.EmbedParams
	for i := int64(0); i < 5; i++ {
		p := tinyencoder.DefaultEmbedParams()
		p.Tokens = tensor.FromInt64([]int64{i, i * 3, i * 7, 11}, 4)
		ps = append(ps, p)
	}
	res, err := c.EmbedBatch(context.Background(), ps)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	var out [][]float32
	for _, r := range res {
		v, err := r.Embedding.Vector.Float32s()
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		out = append(out, v)
	}
	json.NewEncoder(os.Stdout).Encode(out)
}
`

func run(t *testing.T, dir string, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

func TestGeneratedClientInFreshModule(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds a module and a program; skipped with -short")
	}
	root := repoRoot(t)
	dir := t.TempDir()
	ckpt := filepath.Join(dir, "tiny-encoder.pt")
	if err := tinymodels.BuildEncoder(ckpt); err != nil {
		t.Fatal(err)
	}
	manifest, err := os.ReadFile(filepath.Join(root, "manifests", "tiny-encoder.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	must(t, os.MkdirAll(filepath.Join(dir, "manifests"), 0o755))
	must(t, os.WriteFile(filepath.Join(dir, "manifests", "tiny-encoder.yaml"), manifest, 0o644))
	gomod := "module example.com/e2e\n\ngo 1.26\n\nrequire github.com/worldfoundry/wfgen v0.0.0\n\nreplace github.com/worldfoundry/wfgen => " + root + "\n"
	must(t, os.WriteFile(filepath.Join(dir, "go.mod"), []byte(gomod), 0o644))
	sum, err := os.ReadFile(filepath.Join(root, "go.sum"))
	must(t, err)
	must(t, os.WriteFile(filepath.Join(dir, "go.sum"), sum, 0o644))
	must(t, os.MkdirAll(filepath.Join(dir, "cmd", "embed"), 0o755))
	must(t, os.WriteFile(filepath.Join(dir, "cmd", "embed", "main.go"), []byte(program), 0o644))

	wfgen := filepath.Join(dir, "wfgen")
	run(t, root, "go", "build", "-o", wfgen, "./cmd/wfgen")
	run(t, dir, wfgen, "generate", "-o", "models", "manifests")
	if _, err := os.Stat(filepath.Join(dir, "models", "tinyencoder", "tinyencoder.go")); err != nil {
		t.Fatalf("generate wrote no package: %v", err)
	}
	run(t, dir, "go", "vet", "./...")
	bin := filepath.Join(dir, "embed")
	run(t, dir, "go", "build", "-o", bin, "./cmd/embed")
	out := run(t, dir, bin, ckpt)

	var got [][]float32
	if err := json.Unmarshal([]byte(out[strings.Index(out, "["):]), &got); err != nil {
		t.Fatalf("program output %q: %v", out, err)
	}
	if len(got) != 5 {
		t.Fatalf("got %d embeddings, want 5", len(got))
	}

	// The same items, one direct engine call each.
	eng := torch.Default()
	mod, err := eng.Load(ckpt, engine.LoadOptions{Device: "cpu"})
	must(t, err)
	defer mod.Close()
	for i := int64(0); i < 5; i++ {
		o, err := mod.Call(context.Background(), "forward", map[string]any{
			"tokens": tensor.FromInt64([]int64{i, i * 3, i * 7, 11}, 4), "normalize": true}, engine.CallOptions{})
		must(t, err)
		want, err := o.(*tensor.Tensor).Float32s()
		must(t, err)
		for j := range want {
			if d := want[j] - got[i][j]; d > 1e-5 || d < -1e-5 {
				t.Fatalf("item %d [%d]: generated client %v, direct call %v", i, j, got[i][j], want[j])
			}
		}
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
