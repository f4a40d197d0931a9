//go:build cgo

package torch

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/worldfoundry/wfgen/runtime/engine"
	"github.com/worldfoundry/wfgen/runtime/tensor"
)

const failingSource = `
def forward(self, x: Tensor) -> Tensor:
    y = self.helper(x)
    return y * 2.0

def helper(self, x: Tensor) -> Tensor:
    assert bool(x.sum() < 100.0), "item too big"
    return torch.matmul(x, self.w)

def boom(self, n: int) -> Tensor:
    return torch.empty([n, n, n])
`

// A failure inside a TorchScript method keeps the interpreter's final line
// as the message; the whole report is a *engine.ScriptError.
func TestScriptErrorKeepsFinalLine(t *testing.T) {
	m := loadModule(t, ModuleSource{Source: failingSource, Parameters: map[string]*tensor.Tensor{"w": tensor.FromFloat32(make([]float32, 6), 3, 2)}}, engine.LoadOptions{})
	for _, tc := range []struct {
		name   string
		method string
		args   map[string]any
		final  string
		inTB   string
		oom    bool
	}{
		{"assert", "forward", map[string]any{"x": tensor.FromFloat32([]float32{500, 1, 1}, 1, 3)},
			"RuntimeError: AssertionError: item too big", `assert bool(x.sum() < 100.0), "item too big"`, false},
		{"operator", "forward", map[string]any{"x": tensor.FromFloat32([]float32{1, 1, 1, 1}, 1, 4)},
			"RuntimeError: mat1 and mat2 shapes cannot be multiplied (1x4 and 3x2)", "return torch.matmul(x, self.w)", false},
		{"oom", "boom", map[string]any{"n": 1 << 17}, "can't allocate memory", "torch.empty([n, n, n])", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := m.Call(context.Background(), tc.method, tc.args, engine.CallOptions{})
			var te *Error
			if !errors.As(err, &te) {
				t.Fatalf("error %v is not a *torch.Error", err)
			}
			if strings.Contains(err.Error(), "\n") || !strings.Contains(err.Error(), tc.final) {
				t.Errorf("message %q: want one line with %q", err, tc.final)
			}
			var se *engine.ScriptError
			if !errors.As(err, &se) {
				t.Fatalf("error %v does not unwrap to a *engine.ScriptError", err)
			}
			if se.Message != te.Message || !strings.Contains(se.Traceback, "Traceback of TorchScript") || !strings.Contains(se.Traceback, tc.inTB) ||
				!strings.HasSuffix(se.Traceback, se.Message) {
				t.Errorf("script error %+v", se)
			}
			if got := errors.Is(err, engine.ErrOutOfMemory); got != tc.oom {
				t.Errorf("errors.Is(err, ErrOutOfMemory) = %v", got)
			}
		})
	}
	// An error outside the interpreter has no script error.
	_, err := m.Call(context.Background(), "forward", map[string]any{"y": tensor.FromFloat32([]float32{1}, 1)}, engine.CallOptions{})
	var se *engine.ScriptError
	if err == nil || errors.As(err, &se) {
		t.Errorf("bad keyword: %v, script error %v", err, se)
	}
}

func TestFinalLine(t *testing.T) {
	for report, want := range map[string]string{
		"The following operation failed in the TorchScript interpreter.\nTraceback of TorchScript (most recent call last):\nRuntimeError: CUDA out of memory. Tried to allocate 2.00 MiB": "RuntimeError: CUDA out of memory. Tried to allocate 2.00 MiB",
		"Traceback of TorchScript (most recent call last):\n  File \"code/__torch__.py\", line 3\n    x: int = 3\n    ~~~ <--- HERE\ntorch.jit.Error: The following operation failed\n":   "torch.jit.Error: The following operation failed",
		"Traceback of TorchScript (most recent call last):\n  File \"x.py\", line 1\n    y = f(x)\n    ~~~~ <--- HERE\nsomething odd happened\n\n":                                        "something odd happened",
		"Traceback of TorchScript (most recent call last):\n  File \"x.py\", line 1\n    ~~~~ <--- HERE\n    raise ValueError: no\n":                                                      "raise ValueError: no",
	} {
		if got := finalLine(strings.TrimSpace(report)); got != want {
			t.Errorf("finalLine(%q) = %q, want %q", report, got, want)
		}
	}
}

// An op library that does not load fails the load before libtorch sees the
// checkpoint, naming the library and where it was listed.
func TestOpLibraryThatDoesNotLoad(t *testing.T) {
	ckpt := buildModule(t, ModuleSource{Source: "def forward(self, x: Tensor) -> Tensor:\n    return x\n"})
	path := filepath.Join(t.TempDir(), "libmissing_ops.so")
	_, err := Default().Load(ckpt, engine.LoadOptions{Device: "cpu", OpLibraries: []string{path}})
	if err == nil || !strings.Contains(err.Error(), "op library "+path+" (from op_libraries)") {
		t.Errorf("want an error naming %s and op_libraries, got %v", path, err)
	}
	t.Setenv(engine.EnvOpLibraries, "libwfgen_no_such_ops.so")
	_, err = Default().Load(ckpt, engine.LoadOptions{Device: "cpu"})
	if err == nil || !strings.Contains(err.Error(), "op library libwfgen_no_such_ops.so (from "+engine.EnvOpLibraries+")") {
		t.Errorf("want an error naming the library and %s, got %v", engine.EnvOpLibraries, err)
	}
}
