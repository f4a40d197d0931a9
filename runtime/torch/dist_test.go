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
// "Process groups"). A branch with an error is caught: the same check of a
// copy with a misspelt option must fail.
func TestDistNCCLBranchTypeChecks(t *testing.T) {
	if testing.Short() {
		t.Skip("compiles dist.cpp twice (-short)")
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
		"-std=c++17", "-fsyntax-only", "-DUSE_C10D_GLOO", "-DUSE_C10D_NCCL",
		"-I"+fake, "-I"+shimDir, "-I/usr/include/torch/csrc/api/include")
	check := func(src string) (string, error) {
		out, err := exec.Command(cxx, append(flags, src)...).CombinedOutput()
		return string(out), err
	}
	if out, err := check(filepath.Join(shimDir, "dist.cpp")); err != nil {
		t.Fatalf("dist.cpp with USE_C10D_NCCL: %v\n%s", err, out)
	}

	src, err := os.ReadFile(filepath.Join(shimDir, "dist.cpp"))
	if err != nil {
		t.Fatal(err)
	}
	const good = "opts->timeout = timeout;"
	if strings.Count(string(src), good) != 1 {
		t.Fatalf("dist.cpp's NCCL branch no longer sets %q; update this test", good)
	}
	broken := filepath.Join(t.TempDir(), "dist.cpp")
	if err := os.WriteFile(broken, []byte(strings.Replace(string(src), good, "opts->timeoutt = timeout;", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := check(broken); err == nil || !strings.Contains(out, "timeoutt") {
		t.Fatalf("a misspelt option in the NCCL branch type-checked: %v\n%s", err, out)
	}
}
