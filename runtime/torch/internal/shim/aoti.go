package shim

/*
#cgo noescape wf_aoti_call
#cgo nocallback wf_aoti_call
#include "aoti.h"
*/
import "C"

import "unsafe"

// AOTIHandle is an opaque pointer to a loaded AOTInductor package in C++
// memory; the zero AOTIHandle is none.
type AOTIHandle struct{ p *C.wf_aoti }

// Valid reports whether h refers to a package.
func (h AOTIHandle) Valid() bool { return h.p != nil }

// AOTIAvailable reports whether the shim was compiled against a libtorch
// that runs AOTInductor packages (2.6 or later).
func AOTIAvailable() bool { return C.wf_aoti_available() != 0 }

// AOTILoad loads an AOTInductor package onto device. The payload is a value
// blob: a dict of strings with the call spec ("in_spec", "out_spec"), the
// compiled model's "num_inputs" and the package's metadata
// ("metadata.<key>").
func AOTILoad(path, device string, out []byte) (AOTIHandle, Result) {
	var res C.wf_result
	h := C.wf_aoti_load(sptr(path), C.int64_t(len(path)), sptr(device), C.int64_t(len(device)),
		ptr(out), C.int64_t(len(out)), &res)
	return AOTIHandle{h}, finish(&res, out)
}

// AOTICall runs a package. args is a kwargs blob with one argument,
// "inputs", the list of input tensors in the package's order; ptrs hold their
// data, pinned by the caller when there are two or more (as Call). The
// payload is a value blob: the list of output tensors.
func AOTICall(h AOTIHandle, args []byte, ptrs []unsafe.Pointer, out []byte) Result {
	var res C.wf_result
	var only unsafe.Pointer
	arr := pptr(ptrs)
	if len(ptrs) == 1 {
		only, arr = ptrs[0], nil
	}
	C.wf_aoti_call(h.p, ptr(args), C.int64_t(len(args)), arr, C.int64_t(len(ptrs)), only, ptr(out),
		C.int64_t(len(out)), &res)
	return finish(&res, out)
}

// AOTIClose frees a package handle.
func AOTIClose(h AOTIHandle) { C.wf_aoti_close(h.p) }
