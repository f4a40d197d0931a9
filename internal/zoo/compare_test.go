//go:build cgo

package zoo_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/worldfoundry/wfgen/runtime/artifactio"
	"github.com/worldfoundry/wfgen/runtime/tensor"
)

// compare passes equal results only: a different value is reported with
// its max abs difference, a different shape or a missing or extra tensor
// by its path; a bare result's one artifact loses its name in the program's
// paths.
func TestCompare(t *testing.T) {
	write := func(dir, root string, files map[string]*tensor.Tensor) string {
		t.Helper()
		must(t, os.MkdirAll(dir, 0o755))
		if root != "" {
			must(t, os.WriteFile(filepath.Join(dir, "root.txt"), []byte(root+"\n"), 0o644))
		}
		for name, x := range files {
			must(t, artifactio.WriteNPY(filepath.Join(dir, name+".npy"), x))
		}
		return dir
	}
	f := func(v ...float32) *tensor.Tensor { return tensor.FromFloat32(v, int64(len(v))) }
	dir := t.TempDir()
	for i, c := range []struct {
		root      string
		py, prog  map[string]*tensor.Tensor
		diff, msg string
	}{
		{"tensor", map[string]*tensor.Tensor{"out": f(1, 2)}, map[string]*tensor.Tensor{"out.output": f(1, 2)}, "bit-identical", "pass"},
		{"list", map[string]*tensor.Tensor{"out.0": f(1), "out.1": f(2)}, map[string]*tensor.Tensor{"out.output.0": f(1), "out.output.1": f(2)}, "bit-identical (2 tensors)", "pass"},
		{"dict", map[string]*tensor.Tensor{"out.a": f(1, 2)}, map[string]*tensor.Tensor{"out.a": f(1, 2.5)}, "max abs diff 0.5", "differs"},
		{"dict", map[string]*tensor.Tensor{"out.a": f(1, 2)}, map[string]*tensor.Tensor{"out.a": f(1)}, "—", "differs: out.a is float32[1], PyTorch's float32[2]"},
		{"tuple", map[string]*tensor.Tensor{"out.0": f(1), "out.1.0.boxes": f(3)}, map[string]*tensor.Tensor{"out.0": f(1), "out.1.0.scores": f(3)}, "—", "differs: out.1.0.boxes missing; out.1.0.scores not in PyTorch's result"},
	} {
		py := write(filepath.Join(dir, "py", string(rune('a'+i))), c.root, c.py)
		prog := write(filepath.Join(dir, "go", string(rune('a'+i))), "", c.prog)
		diff, msg := compare(t, py, prog)
		if diff != c.diff || msg != c.msg {
			t.Errorf("case %d: %q, %q; want %q, %q", i, diff, msg, c.diff, c.msg)
		}
	}
	if s := table([]*row{{entry: entry{"m", "area"}, result: "Output Tensor", diff: "a|b", status: "pass"}}); !strings.HasSuffix(s, "| m | area | — | Output Tensor | a\\|b | — | pass |\n") {
		t.Errorf("table:\n%s", s)
	}
}
