//go:build cgo

package importer

import (
	"context"
	"errors"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/worldfoundry/wfgen/examples/aoti"
	"github.com/worldfoundry/wfgen/examples/digits"
	"github.com/worldfoundry/wfgen/examples/tinymodels"
	"github.com/worldfoundry/wfgen/runtime/contract"
	"github.com/worldfoundry/wfgen/runtime/torch"

	"github.com/worldfoundry/wfgen/runtime/engine"
	"github.com/worldfoundry/wfgen/runtime/tensor"
)

// signaturesScript scripts modules with every kind of signature the code
// printer writes and saves each to argv[1]/NAME.pt: every default form
// (negative and huge numbers, inf and nan,
// escapes, non-ASCII strings and a tensor, which go to constants.pkl, a
// device, a dtype, tuples), Optional, Union, List, Dict and Tuple types,
// returns of each kind, forward hooks (defined in the class but no
// methods), a property (a method), a helper only forward calls, a traced
// Sequential (a class under __torch__.torch.nn) and a NamedTuple return.
//
// (A float default of 1e15 or more is printed without a point, as an int,
// and libtorch 1.13 then fails to load the archive Python saved.)
const signaturesScript = `
import os, sys
from typing import Any, Dict, List, NamedTuple, Optional, Tuple, Union
import torch

class Sub(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + 1

class Kinds(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.sub = Sub()

    def forward(self, prompt: str, x: torch.Tensor, steps: int = 2, scale: float = 0.5, flag: bool = True,
                sizes: List[int] = (2, 3), weights: List[float] = (1.0, 2.0, 1e-20, 3e30, -0.0, float("inf")),
                tags: List[str] = ("a", "b'\"\\\n\t\x01\u00e9"), o: Optional[torch.Tensor] = None,
                on: Optional[int] = None, t: Tuple[int, str] = (1, "x"), big: int = -9223372036854775807,
                f2: float = 65536.0, f3: float = 123456789.0, f4: float = 0.1, u: Optional[List[int]] = None,
                dev: torch.device = torch.device("cpu"), dt: Optional[int] = torch.float32,
                of: Optional[float] = 2.0, neg: float = -1.5, fn: float = float("nan"),
                ni: float = -float("inf")) -> Dict[str, torch.Tensor]:
        y = self.sub(x) * scale
        return {"video": y, "sizes": torch.tensor(sizes)}

    @torch.jit.export
    def helper(self, a: int) -> Tuple[torch.Tensor, str]:
        return torch.zeros([a]), "s"

    @torch.jit.export
    def nothing(self) -> None:
        pass

    @torch.jit.export
    def anything(self, q: Any, s: torch.Tensor) -> List[Dict[str, float]]:
        return [{"a": 1.0}]

    @torch.jit.export
    def text(self, s: str = "it's \"q\" \\ \n\t\x01\x7f end", e: str = "\u00e9t\u00e9",
             u: Union[int, str] = 3, z: torch.Tensor = torch.zeros(2)) -> str:
        return s

    @torch.jit.export
    def unions(self, a: Union[int, float] = 2, b: Union[float, str] = 3.0,
               c: Optional[Union[int, str]] = None) -> Optional[Dict[str, Optional[torch.Tensor]]]:
        return None

class NT(NamedTuple):
    a: torch.Tensor
    b: int

class Hooked(torch.nn.Module):
    @property
    def p(self) -> int:
        return 5

    def forward(self, x: torch.Tensor) -> NT:
        return NT(self.helper(x) * self.p, 1)

    def helper(self, x: torch.Tensor, k: float = 2.0) -> torch.Tensor:
        return x * k

def pre(mod, inp: Tuple[torch.Tensor]) -> None:
    return None

def post(mod, inp: Tuple[torch.Tensor], out: NT) -> None:
    return None

out = sys.argv[1]
torch.jit.script(Kinds()).save(os.path.join(out, "kinds.pt"))
h = Hooked()
h.register_forward_pre_hook(pre)
h.register_forward_hook(post)
torch.jit.script(h).save(os.path.join(out, "hooked.pt"))
seq = torch.nn.Sequential(torch.nn.Linear(3, 2), torch.nn.ReLU())
torch.jit.trace(seq, torch.zeros(1, 3)).save(os.path.join(out, "traced.pt"))
torch.jit.script(seq).save(os.path.join(out, "scripted_sequential.pt"))
`

// echoScript is the module cmd/wfgen's TestImportTorchBuild imports.
const echoScript = `import sys, torch
from typing import List
class Echo(torch.nn.Module):
    def forward(self, x: torch.Tensor, k: int = 2) -> torch.Tensor:
        return x * k
    @torch.jit.export
    def label(self, names: List[str], sep: str = ",") -> str:
        return sep.join(names)
torch.jit.script(Echo()).save(sys.argv[1])
`

// pythonFixture runs a script with Debian's python3-torch, or skips.
func pythonFixture(t *testing.T, script string, args ...string) {
	t.Helper()
	if out, err := exec.Command(debianPython, "-c", "import torch").CombinedOutput(); err != nil {
		t.Skipf("skipping: %s cannot import torch (install python3-torch): %v\n%s", debianPython, err, out)
	}
	file := filepath.Join(t.TempDir(), "fixture.py")
	if err := os.WriteFile(file, []byte(script), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(debianPython, append([]string{file}, args...)...).CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", script[:min(len(script), 80)], err, out)
	}
}

// checkpoints builds every checkpoint the importer's and the command's
// tests use, and more, into dir: TorchScript source compiled by the engine
// (Module::define), examples/tinymodels, modules scripted and traced by
// Python, and the digits model. It returns their paths by name.
func checkpoints(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	build := func(name string, src torch.ModuleSource) {
		p := filepath.Join(dir, name+".pt")
		if err := torch.BuildModule(src, p); err != nil {
			t.Fatal(err)
		}
		out[name] = p
	}
	build("kinds-source", torch.ModuleSource{Source: kindsSource})
	build("encoder-source", torch.ModuleSource{Source: encoderSource, Parameters: map[string]*tensor.Tensor{"table": tensor.FromFloat32(make([]float32, 40), 10, 4)}})
	for name, f := range map[string]func(string) error{"tiny-encoder": tinymodels.BuildEncoder, "tiny-world": tinymodels.BuildWorld} {
		p := filepath.Join(dir, name+".pt")
		if err := f(p); err != nil {
			t.Fatal(err)
		}
		out[name] = p
	}
	out["py-kinds"] = filepath.Join(dir, "py_kinds.pt")
	exportWithPython(t, out["py-kinds"])
	out["echo"] = filepath.Join(dir, "Echo Model.pt")
	pythonFixture(t, echoScript, out["echo"])
	pythonFixture(t, signaturesScript, dir)
	for _, name := range []string{"kinds", "hooked", "traced", "scripted_sequential"} {
		out["sig-"+name] = filepath.Join(dir, name+".pt")
	}
	if testing.Short() {
		t.Log("-short: not training the digits model")
	} else if msg, err := exec.Command(digits.Python, "-c", "import torch, torchvision, sklearn.datasets").CombinedOutput(); err != nil {
		t.Logf("not training the digits model: %s cannot import torchvision and sklearn: %v\n%s", digits.Python, err, msg)
	} else {
		root := filepath.Join(dir, "digits")
		if _, err := digits.Ensure(context.Background(), root); err != nil {
			t.Fatalf("train the digits model: %v", err)
		}
		out["digits"] = filepath.Join(root, digits.Checkpoint)
	}
	return out
}

// sameDefault compares a default the engine gives with the one the code
// gives: a tensor is an Opaque tensor, NaN equals NaN.
func sameDefault(engine, code any) bool {
	switch e := engine.(type) {
	case *tensor.Tensor:
		o, ok := code.(contract.Opaque)
		return ok && o.Tensor
	case float64:
		c, ok := code.(float64)
		return ok && (c == e && math.Signbit(c) == math.Signbit(e) || math.IsNaN(c) && math.IsNaN(e))
	case []any:
		c, ok := code.([]any)
		if !ok || len(c) != len(e) {
			return false
		}
		for i := range e {
			if !sameDefault(e[i], c[i]) {
				return false
			}
		}
		return true
	case map[string]any:
		c, ok := code.(map[string]any)
		if !ok || len(c) != len(e) {
			return false
		}
		for k, v := range e {
			if !sameDefault(v, c[k]) {
				return false
			}
		}
		return true
	}
	return reflect.DeepEqual(engine, code)
}

// TestImportFileMatchesEngine is issue 32's done-when for the cgo-free
// import: on every checkpoint the tests have, the methods and schemas read
// from the archive's code are the engine's, and ImportFile writes the
// skeleton (and warnings) Import writes with the engine, for every method
// alone and all of them together.
func TestImportFileMatchesEngine(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for name, ckpt := range checkpoints(t, dir) {
		t.Run(name, func(t *testing.T) {
			mod, err := torch.Default().Load(ckpt, engine.LoadOptions{Device: "cpu"})
			if err != nil {
				t.Fatal(err)
			}
			defer mod.Close()
			f, err := os.Open(ckpt)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			st, _ := f.Stat()
			sigs, err := contract.ReadSignatures(f, st.Size())
			if err != nil {
				t.Fatal(err)
			}
			methods := mod.Methods()
			if got := sigs.Methods(); !slices.Equal(got, methods) {
				t.Fatalf("methods from the code %v, the engine's %v", got, methods)
			}
			for _, m := range methods {
				want, err := mod.Schema(m)
				if err != nil {
					t.Fatal(err)
				}
				got, err := sigs.Schema(m)
				if err != nil {
					t.Fatalf("%s: %v", m, err)
				}
				same := got.Name == want.Name && slices.Equal(got.Returns, want.Returns) && len(got.Arguments) == len(want.Arguments)
				for i := 0; same && i < len(want.Arguments); i++ {
					g, w := got.Arguments[i], want.Arguments[i]
					same = g.Name == w.Name && g.Type == w.Type && g.HasDefault == w.HasDefault && sameDefault(w.Default, g.Default)
				}
				if !same {
					t.Errorf("schema of %s:\nfrom the code %#v\nthe engine's  %#v", m, got, want)
				}
			}
			for _, ms := range append([][]string{methods}, splitEach(methods)...) {
				opts := Options{Methods: ms, Output: filepath.Join(dir, "manifests", name+".yaml")}
				want, werr := Import(torch.Default(), ckpt, opts)
				got, gerr := ImportFile(ckpt, opts)
				switch {
				case werr != nil || gerr != nil:
					if werr == nil || gerr == nil || werr.Error() != gerr.Error() {
						t.Errorf("methods %v: engine %v, file %v", ms, werr, gerr)
					}
				case string(got.YAML) != string(want.YAML) || !slices.Equal(got.Warnings, want.Warnings):
					t.Errorf("methods %v: the skeletons differ\nfrom the file:\n%s\n%q\nwith the engine:\n%s\n%q", ms, got.YAML, got.Warnings, want.YAML, want.Warnings)
				}
			}
			if _, err := ImportFile(ckpt, Options{Methods: []string{"nope"}}); err == nil || !strings.Contains(err.Error(), "(its methods: "+strings.Join(methods, ", ")+")") {
				t.Errorf("unknown method: %v", err)
			}
		})
	}
}

func splitEach(ms []string) [][]string {
	var out [][]string
	for _, m := range ms {
		out = append(out, []string{m})
	}
	return out
}

// TestImportFilePackageMatchesEngine compares the call-spec skeleton of an
// AOTInductor package, read from its metadata, with the engine's (needs
// libtorch ≥ 2.6 and Python's torch 2.6 to export: the libtorch 2.x lane).
func TestImportFilePackageMatchesEngine(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("-short: exports a package")
	}
	if err := aoti.Available(context.Background()); err != nil {
		t.Skipf("skipping: %v", err)
	}
	f, err := aoti.Cached(context.Background(), aoti.Encoder)
	if err != nil {
		t.Fatal(err)
	}
	opts := Options{Output: filepath.Join(t.TempDir(), "encoder.yaml")}
	want, err := Import(torch.Default(), f.Package, opts)
	if errors.Is(err, torch.ErrAOTIUnavailable) {
		t.Skipf("skipping: %v", err)
	} else if err != nil {
		t.Fatal(err)
	}
	got, err := ImportFile(f.Package, opts)
	if err != nil {
		t.Fatal(err)
	}
	if string(got.YAML) != string(want.YAML) || !slices.Equal(got.Warnings, want.Warnings) {
		t.Errorf("the skeletons differ\nfrom the file:\n%s\n%q\nwith the engine:\n%s\n%q", got.YAML, got.Warnings, want.YAML, want.Warnings)
	}
}
