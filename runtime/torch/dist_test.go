//go:build cgo

package torch

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestDistNCCLBranchTypeChecks compiles the shim's NCCL branch (dist.cpp
// with USE_C10D_NCCL) against this libtorch's ProcessGroupNCCL.hpp with
// g++ -fsyntax-only, on a machine without CUDA or NCCL: testdata/fakecuda
// declares the CUDA runtime and NCCL API those headers use. It proves the
// branch is valid C++ for this libtorch's API (1.13 and 2.6 in the lanes);
// running it needs a CUDA libtorch with NCCL and a GPU (docs/processes.md,
// "Process groups"). The preprocessed source is checked to hold the branch,
// so the check cannot pass by compiling it away.
func TestDistNCCLBranchTypeChecks(t *testing.T) {
	if testing.Short() {
		t.Skip("compiles dist.cpp (-short)")
	}
	cxx, err := exec.LookPath("c++")
	if err != nil {
		t.Skip("no C++ compiler")
	}
	shimDir, err := filepath.Abs(filepath.Join("internal", "shim"))
	if err != nil {
		t.Fatal(err)
	}
	fake, err := filepath.Abs(filepath.Join("testdata", "fakecuda"))
	if err != nil {
		t.Fatal(err)
	}
	// The shim's own flags: a custom libtorch's from CGO_CXXFLAGS first,
	// then Debian's C++ API directory (as libtorch_debian.go adds).
	flags := append(strings.Fields(os.Getenv("CGO_CXXFLAGS")),
		"-std=c++17", "-DUSE_C10D_GLOO", "-DUSE_C10D_NCCL",
		"-I"+fake, "-I"+shimDir, "-I/usr/include/torch/csrc/api/include")
	src := filepath.Join(shimDir, "dist.cpp")
	pre, err := exec.Command(cxx, append(flags, "-E", "-P", src)...).Output()
	if err != nil {
		t.Fatalf("preprocessing dist.cpp with USE_C10D_NCCL: %v", err)
	}
	if !strings.Contains(string(pre), "c10::make_intrusive<c10d::ProcessGroupNCCL>(") {
		t.Fatal("the preprocessed dist.cpp has no NCCL branch: USE_C10D_NCCL did not reach it")
	}
	if out, err := exec.Command(cxx, append(flags, "-fsyntax-only", src)...).CombinedOutput(); err != nil {
		t.Fatalf("dist.cpp with USE_C10D_NCCL: %v\n%s", err, out)
	}
}
