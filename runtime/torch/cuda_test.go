//go:build cgo

package torch

import (
	"errors"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/worldfoundry/wfgen/runtime/engine"
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

// The emptyCache layouts the fake CUDA runtime can be built with.
const (
	fakeTorch1 = "torch1" // libtorch 1.x: an exported emptyCache function
	fakeTorch2 = "torch2" // libtorch 2.x: the allocator object's virtual emptyCache
	fakeNone   = "none"   // neither
)

// buildFakeCUDART compiles testdata/fakecudart.c (and for fakeTorch2
// testdata/fakecudart_torch2.cpp) into a shared library.
func buildFakeCUDART(t *testing.T, layout string) string {
	t.Helper()
	lib := filepath.Join(t.TempDir(), "libfakecudart-"+layout+".so")
	src := filepath.Join("testdata", "fakecudart.c")
	compiler, args := "cc", []string{"-shared", "-fPIC", "-o", lib}
	switch layout {
	case fakeTorch1:
		args = append(args, src)
	case fakeTorch2:
		compiler = "c++"
		args = append(args, "-DFAKE_TORCH2", "-x", "c", src, "-x", "c++", "-std=c++17", filepath.Join("testdata", "fakecudart_torch2.cpp"))
	case fakeNone:
		args = append(args, "-DFAKE_TORCH2", src)
	}
	cc, err := exec.LookPath(compiler)
	if err != nil {
		t.Skipf("no compiler (%s) to build the fake CUDA runtime", compiler)
	}
	out, err := exec.Command(cc, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("building the fake CUDA runtime: %v\n%s", err, out)
	}
	return lib
}

// The CUDA runtime is reached through dlsym; a fake libcudart exercises that
// path and the engine's CUDA logic without a GPU.
func TestCUDAThroughRuntimeLookup(t *testing.T) {
	rt, err := openCUDART(buildFakeCUDART(t, fakeTorch1))
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
	want := []engine.DeviceInfo{
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
	checkEmptyCacheFrees(t, e)
}

// checkEmptyCacheFrees empties the cache and checks that the fake's free
// memory grew by the 256 MiB its emptyCache releases.
func checkEmptyCacheFrees(t *testing.T, e *Engine) {
	t.Helper()
	before, err := e.CUDADevice(1)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.EmptyCache(); err != nil {
		t.Fatalf("EmptyCache() = %v", err)
	}
	after, err := e.CUDADevice(1)
	if err != nil {
		t.Fatal(err)
	}
	if got := after.FreeBytes - before.FreeBytes; got != 256<<20 {
		t.Errorf("EmptyCache() freed %d bytes, want the fake allocator's 256 MiB", got)
	}
}

// libtorch 2.x has no emptyCache function to look up: the engine finds the
// virtual emptyCache's slot through torch::cuda::CUDAPluggableAllocator's
// exported vtable and calls it on the allocator object; with neither that
// nor 1.x's function, EmptyCache fails instead of doing nothing.
func TestCUDAEmptyCacheLayouts(t *testing.T) {
	rt, err := openCUDART(buildFakeCUDART(t, fakeTorch2))
	if err != nil {
		t.Fatal(err)
	}
	rt.requireEmptyCache = true
	checkEmptyCacheFrees(t, &Engine{cuda: rt})

	rt, err = openCUDART(buildFakeCUDART(t, fakeNone))
	if err != nil {
		t.Fatal(err)
	}
	rt.requireEmptyCache = true
	if err := (&Engine{cuda: rt}).EmptyCache(); err == nil || !strings.Contains(err.Error(), "not found") {
		t.Errorf("EmptyCache() without an allocator = %v, want an error", err)
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
