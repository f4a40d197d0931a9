// Package shim is the cgo binding to wfgen's C++ libtorch shim (shim.cpp).
//
// It is deliberately thin and stable: the C++ file takes tens of seconds to
// compile and Go's build cache recompiles a cgo package whenever any of its
// files change, so every policy decision lives in package runtime/torch and
// this package only moves bytes across the boundary. Each function makes one
// cgo call (plus one wf_free when a payload overflowed the caller's buffer).
//
// Where libtorch is comes from libtorch_debian.go (Debian's libtorch-dev, the
// default) or, with the build tag libtorch_custom, from CGO_CXXFLAGS and
// CGO_LDFLAGS alone; docs/engine.md, "Finding libtorch", has the details.
package shim

/*
#cgo CXXFLAGS: -std=c++17 -O2 -Wno-unused-parameter
#cgo LDFLAGS: -ldl
#cgo noescape wf_call
#cgo nocallback wf_call
#include <stdlib.h>
#include "shim.h"
*/
import "C"

import (
	"unsafe"
)

// Status codes of a shim call.
const (
	// OK means success; the payload is a value blob.
	OK = int(C.WF_OK)
	// Error means failure; the payload is the message.
	Error = int(C.WF_ERROR)
	// OOM means an allocation failed; the payload is the message.
	OOM = int(C.WF_OOM)
)

// Handle is an opaque pointer to a loaded module in C++ memory; the zero
// Handle is none.
type Handle struct{ p *C.wf_module }

// Valid reports whether h refers to a module.
func (h Handle) Valid() bool { return h.p != nil }

// Result is the outcome of a call: a status and its payload. Payload aliases
// the caller's buffer when it fitted, else it is a fresh Go copy.
type Result struct {
	Status  int
	Payload []byte
}

func ptr(b []byte) *C.char {
	if len(b) == 0 {
		return nil
	}
	return (*C.char)(unsafe.Pointer(&b[0]))
}

func sptr(s string) *C.char {
	if len(s) == 0 {
		return nil
	}
	return (*C.char)(unsafe.Pointer(unsafe.StringData(s)))
}

func pptr(p []unsafe.Pointer) *unsafe.Pointer {
	if len(p) == 0 {
		return nil
	}
	return &p[0]
}

func finish(res *C.wf_result, out []byte) Result {
	r := Result{Status: int(res.status)}
	if res.overflow != nil {
		r.Payload = C.GoBytes(res.overflow, C.int(res.size))
		C.wf_free(res.overflow)
		return r
	}
	r.Payload = out[:res.size]
	return r
}

// Init sets libtorch's intra-op and (when > 0) inter-op thread counts and
// whether TorchScript may fuse on the CPU, and returns libtorch's
// parallel-configuration text.
func Init(threads, interopThreads int, cpuFusion bool, out []byte) Result {
	var res C.wf_result
	C.wf_init(C.int32_t(threads), C.int32_t(interopThreads), b32(cpuFusion), ptr(out), C.int64_t(len(out)), &res)
	return finish(&res, out)
}

// CPUFusion reports whether TorchScript fuses on the CPU: allowed and
// possible (libtorch built with LLVM).
func CPUFusion() bool { return C.wf_cpu_fusion() != 0 }

// Version returns the libtorch version the shim was compiled against.
func Version() string { return C.GoString(C.wf_version()) }

// VersionNumbers returns the major, minor and patch numbers of the libtorch
// the shim was compiled against (torch/version.h).
func VersionNumbers() (major, minor, patch int) {
	return int(C.wf_version_major()), int(C.wf_version_minor()), int(C.wf_version_patch())
}

// AutocastState is the CUDA autocast state: enabled and the dtype code.
type AutocastState struct {
	Enabled bool
	DType   int
}

// AutocastProbe enters and leaves the CUDA autocast scope a call with
// autocastDType makes and returns the state inside and after it.
func AutocastProbe(autocastDType int) (inside, after AutocastState) {
	var st [4]C.int32_t
	C.wf_autocast_probe(C.int32_t(autocastDType), &st[0])
	return AutocastState{st[0] != 0, int(st[1])}, AutocastState{st[2] != 0, int(st[3])}
}

// Load loads a TorchScript file onto device, casting floating parameters and
// buffers to dtype (0 keeps them). The payload is the module-info blob.
func Load(path, device string, dtype int, out []byte) (Handle, Result) {
	var res C.wf_result
	h := C.wf_load(sptr(path), C.int64_t(len(path)), sptr(device), C.int64_t(len(device)), C.int32_t(dtype),
		ptr(out), C.int64_t(len(out)), &res)
	return Handle{h}, finish(&res, out)
}

// Call runs one method. args is a kwargs blob; ptrs hold the tensor data the
// blob refers to. With two or more, the caller must pin the data; a single
// one goes to C as a plain argument, which cgo keeps pinned for the call.
// autocastDType is a dtype code for CUDA autocast or 0.
func Call(h Handle, method string, args []byte, ptrs []unsafe.Pointer, autocastDType int, out []byte) Result {
	var res C.wf_result
	var only unsafe.Pointer
	arr := pptr(ptrs)
	if len(ptrs) == 1 {
		only, arr = ptrs[0], nil
	}
	C.wf_call(h.p, sptr(method), C.int64_t(len(method)), ptr(args),
		C.int64_t(len(args)), arr, C.int64_t(len(ptrs)), only, C.int32_t(autocastDType), ptr(out),
		C.int64_t(len(out)), &res)
	return finish(&res, out)
}

// NeedsPin reports whether Call needs the data behind ptrs pinned.
func NeedsPin(ptrs []unsafe.Pointer) bool { return len(ptrs) > 1 }

// Close frees a module handle.
func Close(h Handle) { C.wf_close(h.p) }

// Compile levels.
const (
	// Freeze only freezes.
	Freeze = 0
	// FreezeOptimize freezes and fuses (optimize_for_inference without the
	// MKLDNN layout conversion).
	FreezeOptimize = 1
)

// Compile freezes a module at a compile level into a new handle; the payload
// is the new module-info blob.
func Compile(h Handle, level int, out []byte) (Handle, Result) {
	var res C.wf_result
	nh := C.wf_compile(h.p, C.int32_t(level), ptr(out), C.int64_t(len(out)), &res)
	return Handle{nh}, finish(&res, out)
}

// Save writes a module as a TorchScript archive.
func Save(h Handle, path string, out []byte) Result {
	var res C.wf_result
	C.wf_save(h.p, sptr(path), C.int64_t(len(path)), ptr(out), C.int64_t(len(out)), &res)
	return finish(&res, out)
}

// Define builds a module from TorchScript source and named tensors (blob of
// parameters and buffers) and saves it to path.
func Define(source string, tensors []byte, ptrs []unsafe.Pointer, path string, out []byte) Result {
	var res C.wf_result
	C.wf_define(sptr(source), C.int64_t(len(source)), ptr(tensors), C.int64_t(len(tensors)), pptr(ptrs),
		C.int64_t(len(ptrs)), sptr(path), C.int64_t(len(path)), ptr(out), C.int64_t(len(out)), &res)
	return finish(&res, out)
}

// Flags mirrors the process-global libtorch flags (wf_flags).
type Flags struct {
	// MatmulPrecision is 0 highest, 1 high, 2 medium.
	MatmulPrecision int
	// AllowTF32CuBLAS is derived by libtorch from MatmulPrecision (read only).
	AllowTF32CuBLAS bool
	// AllowTF32CuDNN allows TF32 in cuDNN convolutions.
	AllowTF32CuDNN bool
	// FlashSDP and MathSDP enable the scaled-dot-product-attention kernels.
	FlashSDP, MathSDP bool
	// Deterministic and DeterministicWarnOnly mirror use_deterministic_algorithms.
	Deterministic, DeterministicWarnOnly bool
	// DeterministicCuDNN and BenchmarkCuDNN mirror the cuDNN switches.
	DeterministicCuDNN, BenchmarkCuDNN bool
}

func b32(b bool) C.int32_t {
	if b {
		return 1
	}
	return 0
}

// GetFlags reads the global flags.
func GetFlags() Flags {
	var f C.wf_flags
	C.wf_flags_get(&f)
	return Flags{
		MatmulPrecision:       int(f.matmul_precision),
		AllowTF32CuBLAS:       f.allow_tf32_cublas != 0,
		AllowTF32CuDNN:        f.allow_tf32_cudnn != 0,
		FlashSDP:              f.flash_sdp != 0,
		MathSDP:               f.math_sdp != 0,
		Deterministic:         f.deterministic != 0,
		DeterministicWarnOnly: f.deterministic_warn_only != 0,
		DeterministicCuDNN:    f.deterministic_cudnn != 0,
		BenchmarkCuDNN:        f.benchmark_cudnn != 0,
	}
}

// SetFlags writes the global flags (AllowTF32CuBLAS is ignored).
func SetFlags(fl Flags, out []byte) Result {
	f := C.wf_flags{
		matmul_precision:        C.int32_t(fl.MatmulPrecision),
		allow_tf32_cudnn:        b32(fl.AllowTF32CuDNN),
		flash_sdp:               b32(fl.FlashSDP),
		math_sdp:                b32(fl.MathSDP),
		deterministic:           b32(fl.Deterministic),
		deterministic_warn_only: b32(fl.DeterministicWarnOnly),
		deterministic_cudnn:     b32(fl.DeterministicCuDNN),
		benchmark_cudnn:         b32(fl.BenchmarkCuDNN),
	}
	var res C.wf_result
	C.wf_flags_set(&f, ptr(out), C.int64_t(len(out)), &res)
	return finish(&res, out)
}

// CUDAAvailable reports whether libtorch was built with CUDA and sees a device.
func CUDAAvailable() bool { return C.wf_cuda_available() != 0 }

// CUDADeviceCount is libtorch's CUDA device count (0 on CPU builds).
func CUDADeviceCount() int { return int(C.wf_cuda_device_count()) }

// CUDACurrentDevice is libtorch's current CUDA device.
func CUDACurrentDevice(out []byte) (int, Result) {
	var res C.wf_result
	i := C.wf_cuda_current_device(ptr(out), C.int64_t(len(out)), &res)
	return int(i), finish(&res, out)
}

// CUDART is a CUDA runtime resolved by symbol lookup, so that CPU builds
// link without it.
type CUDART struct{ c *C.wf_cudart }

// DeviceInfo is what CUDART.Device reports.
type DeviceInfo struct {
	// Name is the device name.
	Name string
	// Major and Minor are the compute capability.
	Major, Minor int
	// FreeBytes and TotalBytes are the device memory figures.
	FreeBytes, TotalBytes uint64
}

func errText(b []byte) string {
	for i, c := range b {
		if c == 0 {
			return string(b[:i])
		}
	}
	return string(b)
}

// cudartOut is the message buffer of the CUDA runtime calls.
const cudartOut = 512

// OpenCUDART resolves the CUDA runtime from path, or when path is empty from
// the process (libtorch_cuda's libcudart) or libcudart.so*.
func OpenCUDART(path string) (CUDART, Result) {
	var res C.wf_result
	out := make([]byte, cudartOut)
	c := C.wf_cudart_open(sptr(path), C.int64_t(len(path)), ptr(out), C.int64_t(len(out)), &res)
	return CUDART{c}, finish(&res, out)
}

// DeviceCount returns cudaGetDeviceCount.
func (c CUDART) DeviceCount() (int, Result) {
	var res C.wf_result
	var n C.int32_t
	out := make([]byte, cudartOut)
	C.wf_cudart_device_count(c.c, &n, ptr(out), C.int64_t(len(out)), &res)
	return int(n), finish(&res, out)
}

// CurrentDevice returns cudaGetDevice.
func (c CUDART) CurrentDevice() (int, Result) {
	var res C.wf_result
	var n C.int32_t
	out := make([]byte, cudartOut)
	C.wf_cudart_current_device(c.c, &n, ptr(out), C.int64_t(len(out)), &res)
	return int(n), finish(&res, out)
}

// Device returns name, capability and memory of one device.
func (c CUDART) Device(index int) (DeviceInfo, Result) {
	var res C.wf_result
	var info C.wf_device_info
	out := make([]byte, cudartOut)
	C.wf_cudart_device(c.c, C.int32_t(index), &info, ptr(out), C.int64_t(len(out)), &res)
	r := finish(&res, out)
	if r.Status != OK {
		return DeviceInfo{}, r
	}
	name := C.GoString(&info.name[0])
	return DeviceInfo{Name: name, Major: int(info.major), Minor: int(info.minor),
		FreeBytes: uint64(info.free_bytes), TotalBytes: uint64(info.total_bytes)}, r
}

// Synchronize waits for all work on one device.
func (c CUDART) Synchronize(index int) Result {
	var res C.wf_result
	out := make([]byte, cudartOut)
	C.wf_cudart_synchronize(c.c, C.int32_t(index), ptr(out), C.int64_t(len(out)), &res)
	return finish(&res, out)
}

// EmptyCache calls libtorch's CUDA caching allocator emptyCache when present
// and reports whether it found one.
func (c CUDART) EmptyCache() (bool, Result) {
	var res C.wf_result
	var called C.int32_t
	out := make([]byte, cudartOut)
	C.wf_cudart_empty_cache(c.c, &called, ptr(out), C.int64_t(len(out)), &res)
	return called != 0, finish(&res, out)
}
