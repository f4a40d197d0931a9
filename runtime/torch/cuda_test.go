//go:build cgo

package torch

import (
	"errors"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/worldfoundry/wfgen/runtime"
)

// On the CPU build of libtorch the engine reports no CUDA and every
// CUDA-only call fails cleanly.
func TestCUDAOnCPUBuild(t *testing.T) {
	e := Default()
	if n := e.CUDADeviceCount(); n != 0 {
		t.Skipf("libtorch sees %d CUDA devices: this test is for the CPU build", n)
	}
	if _, err := e.CUDACurrentDevice(); !errors.Is(err, errNoCUDA) {
		t.Errorf("CUDACurrentDevice error = %v", err)
	}
	if _, err := e.CUDADevice(0); !errors.Is(err, errNoCUDA) {
		t.Errorf("CUDADevice(0) error = %v", err)
	}
	for _, d := range []string{"", "cpu", "mps"} {
		if err := e.Synchronize(d); err != nil {
			t.Errorf("Synchronize(%q) = %v", d, err)
		}
	}
	if err := e.Synchronize("cuda:0"); err == nil || !strings.Contains(err.Error(), "0 CUDA devices visible") {
		t.Errorf("Synchronize(cuda:0) = %v", err)
	}
	if err := e.EmptyCache(); err != nil {
		t.Errorf("EmptyCache() = %v", err)
	}
}

// buildFakeCUDART compiles testdata/fakecudart.c into a shared library.
func buildFakeCUDART(t *testing.T) string {
	t.Helper()
	cc, err := exec.LookPath("cc")
	if err != nil {
		t.Skip("no C compiler (cc) to build the fake CUDA runtime")
	}
	lib := filepath.Join(t.TempDir(), "libfakecudart.so")
	out, err := exec.Command(cc, "-shared", "-fPIC", "-o", lib, filepath.Join("testdata", "fakecudart.c")).CombinedOutput()
	if err != nil {
		t.Fatalf("building the fake CUDA runtime: %v\n%s", err, out)
	}
	return lib
}

// The CUDA runtime is reached through dlsym; a fake libcudart exercises that
// path and the engine's CUDA logic without a GPU.
func TestCUDAThroughRuntimeLookup(t *testing.T) {
	rt, err := openCUDART(buildFakeCUDART(t))
	if err != nil {
		t.Fatal(err)
	}
	rt.requireEmptyCache = true
	e := &Engine{cuda: rt}
	if n := e.CUDADeviceCount(); n != 2 {
		t.Fatalf("CUDADeviceCount() = %d", n)
	}
	if i, err := e.CUDACurrentDevice(); err != nil || i != 1 {
		t.Fatalf("CUDACurrentDevice() = %d, %v", i, err)
	}
	want := []runtime.DeviceInfo{
		{Index: 0, Name: "Fake T4", Major: 7, Minor: 5, FreeBytes: 1 << 30, TotalBytes: 1 << 32},
		{Index: 1, Name: "Fake A100", Major: 8, Minor: 6, FreeBytes: 2 << 30, TotalBytes: 2 << 32},
	}
	for i, w := range want {
		got, err := e.CUDADevice(i)
		if err != nil || !reflect.DeepEqual(got, w) {
			t.Errorf("CUDADevice(%d) = %+v, %v; want %+v", i, got, err, w)
		}
	}
	// Querying device 0 switched to it and back.
	if i, _ := e.CUDACurrentDevice(); i != 1 {
		t.Errorf("current device after queries = %d, want 1", i)
	}
	if _, err := e.CUDADevice(2); err == nil || !strings.Contains(err.Error(), "2 devices visible") {
		t.Errorf("CUDADevice(2) error = %v", err)
	}
	for _, d := range []string{"", "cuda", "cuda:1", "cpu"} {
		if err := e.Synchronize(d); err != nil {
			t.Errorf("Synchronize(%q) = %v", d, err)
		}
	}
	if err := e.Synchronize("cuda:0"); err == nil || !strings.Contains(err.Error(), "an illegal memory access was encountered") {
		t.Errorf("Synchronize(cuda:0) error = %v", err)
	}
	if i, _ := e.CUDACurrentDevice(); i != 1 {
		t.Errorf("current device after a failed synchronize = %d, want 1", i)
	}
	for _, d := range []string{"cuda:x", "cuda:-1", "cuda:9"} {
		if err := e.Synchronize(d); err == nil {
			t.Errorf("Synchronize(%q) succeeded", d)
		}
	}
	if err := e.EmptyCache(); err != nil {
		t.Errorf("EmptyCache() = %v (the fake defines the allocator symbol)", err)
	}
}

func TestCUDARuntimeLookupErrors(t *testing.T) {
	if _, err := openCUDART(filepath.Join(t.TempDir(), "missing.so")); err == nil || !strings.Contains(err.Error(), "dlopen") {
		t.Errorf("missing library: error = %v", err)
	}
	// libc is a real library without the CUDA runtime API.
	if _, err := openCUDART("libc.so.6"); err == nil || !strings.Contains(err.Error(), "lacks the CUDA runtime API") {
		t.Errorf("library without CUDA: error = %v", err)
	}
	if Default().CUDADeviceCount() == 0 {
		if _, err := openCUDART(""); err == nil {
			t.Log("a CUDA runtime is installed although libtorch is a CPU build")
		} else if !strings.Contains(err.Error(), "CUDA runtime not found") {
			t.Errorf("process lookup: error = %v", err)
		}
	}
}
