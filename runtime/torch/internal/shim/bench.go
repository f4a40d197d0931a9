//go:build cgo && wfbench

package shim

// The benchmark loops of the shim (wf_bench_*) exist only in builds with
// -tags wfbench: the production shim does not carry them.

/*
#cgo CPPFLAGS: -DWF_BENCH
#include "shim.h"
*/
import "C"

import "unsafe"

// BenchRaw runs a method n times in a plain C++ loop and returns the elapsed
// nanoseconds (-1 on failure, with the message in the result).
func BenchRaw(h Handle, method string, args []byte, ptrs []unsafe.Pointer, n int, out []byte) (int64, Result) {
	var res C.wf_result
	ns := C.wf_bench_raw(h.p, sptr(method), C.int64_t(len(method)), ptr(args),
		C.int64_t(len(args)), pptr(ptrs), C.int64_t(len(ptrs)), C.int64_t(n), ptr(out), C.int64_t(len(out)), &res)
	return int64(ns), finish(&res, out)
}

// BenchCall runs the shim's call path n times in a C++ loop and returns the
// elapsed nanoseconds (-1 on failure, with the message in the result).
func BenchCall(h Handle, method string, args []byte, ptrs []unsafe.Pointer, n int, out []byte) (int64, Result) {
	var res C.wf_result
	ns := C.wf_bench_call(h.p, sptr(method), C.int64_t(len(method)), ptr(args),
		C.int64_t(len(args)), pptr(ptrs), C.int64_t(len(ptrs)), C.int64_t(n), ptr(out), C.int64_t(len(out)), &res)
	return int64(ns), finish(&res, out)
}
