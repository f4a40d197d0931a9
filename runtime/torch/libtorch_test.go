//go:build cgo

package torch

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/worldfoundry/wfgen/runtime/torch/internal/shim"

	"github.com/worldfoundry/wfgen/runtime/tensor"
)

// debianPythonTorch asks /usr/bin/python3 (Debian's python3-torch, built
// from the same source package as libtorch-dev) to evaluate expr after
// importing torch, or skips the test saying what to install.
func debianPythonTorch(t *testing.T, expr string) string {
	t.Helper()
	out, err := exec.Command("/usr/bin/python3", "-c", "import torch; print("+expr+")").CombinedOutput()
	if err != nil {
		t.Skipf("/usr/bin/python3 cannot import torch (install Debian's python3-torch; scripts/setup.sh does): %v\n%s", err, out)
	}
	return strings.TrimSpace(string(out))
}

// The engine's compile-time version is the libtorch it runs with: the
// release of Debian's python3-torch next to it (1.13 on bookworm, 2.6 in the
// trixie lane).
func TestLibtorchVersionMatchesInstalledTorch(t *testing.T) {
	v := Default().LibtorchVersion()
	if v.String() != Default().Version() {
		t.Errorf("LibtorchVersion() = %v, Version() = %q", v, Default().Version())
	}
	py := debianPythonTorch(t, "torch.__version__")
	if want := v.String()[:strings.LastIndex(v.String(), ".")+1]; !strings.HasPrefix(py, want) {
		t.Errorf("engine compiled against libtorch %v, python3-torch is %s", v, py)
	}
	for _, c := range []struct {
		major, minor int
		want         bool
	}{{v.Major, v.Minor, true}, {v.Major, v.Minor + 1, false}, {v.Major + 1, 0, false}, {v.Major - 1, 99, true}, {1, 13, true}} {
		if got := v.AtLeast(c.major, c.minor); got != c.want {
			t.Errorf("%v.AtLeast(%d, %d) = %v", v, c.major, c.minor, got)
		}
	}
}

// A call with CUDA autocast enables it with the asked dtype for the call
// and restores the state after, through the autocast API of the libtorch at
// hand (per-device calls since 2.4). The state is thread-local flags, so
// this runs without a GPU.
func TestAutocastScopeSetsAndRestoresCUDAAutocast(t *testing.T) {
	before, after := shim.AutocastProbe(0)
	if before != after || before.Enabled {
		t.Fatalf("without autocast: state %+v, after %+v; want disabled and unchanged", before, after)
	}
	for _, dt := range []tensor.DType{tensor.Float16, tensor.BFloat16} {
		code, _ := dtypeCode(dt)
		inside, after := shim.AutocastProbe(code)
		if want := (shim.AutocastState{Enabled: true, DType: code}); inside != want {
			t.Errorf("%s: inside the call autocast is %+v, want %+v", dt, inside, want)
		}
		if after != before {
			t.Errorf("%s: after the call autocast is %+v, want %+v as before", dt, after, before)
		}
	}
}

// The engine turns TorchScript's CPU fusion off unless EnvCPUFusion is 1; a
// bad value fails the engine's first use.
func TestCPUFusionSetting(t *testing.T) {
	defer func() {
		t.Setenv(EnvCPUFusion, "")
		if _, err := (&Engine{}).ParallelInfo(); err != nil || shim.CPUFusion() {
			t.Errorf("restoring the default: %v, fusion %v", err, shim.CPUFusion())
		}
	}()
	for _, v := range []string{"", "0"} {
		t.Setenv(EnvCPUFusion, v)
		if _, err := (&Engine{}).ParallelInfo(); err != nil {
			t.Fatalf("%s=%q: %v", EnvCPUFusion, v, err)
		}
		if shim.CPUFusion() {
			t.Errorf("%s=%q: TorchScript fuses on the CPU", EnvCPUFusion, v)
		}
	}
	for _, v := range []string{"2", "yes", "-1"} {
		t.Setenv(EnvCPUFusion, v)
		if _, err := (&Engine{}).ParallelInfo(); err == nil || !strings.Contains(err.Error(), EnvCPUFusion) {
			t.Errorf("%s=%q: error %v, want one naming the variable", EnvCPUFusion, v, err)
		}
	}
	t.Setenv(EnvCPUFusion, "1")
	if _, err := (&Engine{}).ParallelInfo(); err != nil {
		t.Fatal(err)
	}
	if !shim.CPUFusion() {
		t.Errorf("%s=1: TorchScript does not fuse on the CPU", EnvCPUFusion)
	}
}
