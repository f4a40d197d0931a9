package enginetest

import (
	_ "embed"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/worldfoundry/wfgen/runtime/engine"
)

// DebianPython is Debian's interpreter, the one python3-torch and
// python3-torchvision are installed for (the python3 first on PATH may be
// another).
const DebianPython = "/usr/bin/python3"

//go:embed testdata/nms.py
var nmsScript []byte

// NMS is a Checkpoints Build function: a tiny TorchScript module that
// calls torchvision's custom op torchvision::nms (nms.pt), an input
// (boxes.npy, scores.npy) and PyTorch's output for it (out.npy, one
// thread), written by Debian's Python. Tests that use it call
// TorchvisionOps first, which skips them when Python or the op library is
// missing.
func NMS(dir string) error {
	script := filepath.Join(dir, "nms.py") // TorchScript compiles from a source file
	if err := os.WriteFile(script, nmsScript, 0o644); err != nil {
		return err
	}
	defer os.Remove(script)
	if out, err := exec.Command(DebianPython, script, dir).CombinedOutput(); err != nil {
		return fmt.Errorf("nms.py: %v\n%s", err, out)
	}
	return nil
}

// TorchvisionOps returns the path of Debian's torchvision op library
// (python3-torchvision's extension module, which registers
// torchvision::nms and its other ops; engine.KnownOpLibrary), or skips the
// test when it is not installed or Debian's Python cannot import torch and
// torchvision.
func TorchvisionOps(t testing.TB) string {
	t.Helper()
	if out, err := exec.Command(DebianPython, "-c", "import torch, torchvision").CombinedOutput(); err != nil {
		t.Skipf("%s cannot import torch and torchvision (install python3-torchvision; scripts/setup.sh): %v\n%s", DebianPython, err, out)
	}
	path, ok := engine.KnownOpLibrary("torchvision")
	if !ok {
		t.Skip("Debian's torchvision op library is not installed (python3-torchvision)")
	}
	return path
}
