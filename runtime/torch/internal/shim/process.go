package shim

/*
#define _GNU_SOURCE
#include <dlfcn.h>
#include <malloc.h>
#include <stdlib.h>
#include <string.h>

// wf_malloc_retain sets glibc malloc's mmap and trim thresholds (mallopt);
// it returns 1 when both were set, 0 when this C library is not glibc or
// refused a value.
static int wf_malloc_retain(int mmap_threshold, int trim_threshold) {
#ifdef __GLIBC__
	return mallopt(M_MMAP_THRESHOLD, mmap_threshold) == 1 && mallopt(M_TRIM_THRESHOLD, trim_threshold) == 1;
#else
	return 0;
#endif
}

// wf_blas_threads sets OpenBLAS's thread count when n > 0 and returns it,
// or -1 when the process has no OpenBLAS (looked up by symbol: libtorch
// reaches its BLAS through libblas.so.3, whichever one it is).
static int wf_blas_threads(int n) {
	void (*set)(int) = (void (*)(int))dlsym(RTLD_DEFAULT, "openblas_set_num_threads");
	int (*get)(void) = (int (*)(void))dlsym(RTLD_DEFAULT, "openblas_get_num_threads");
	if (set == NULL || get == NULL) return -1;
	if (n > 0) set(n);
	return get();
}

// wf_dlopen loads a shared library with RTLD_NOW | RTLD_GLOBAL, so that its
// static initializers run (a TorchScript op library registers its ops in
// them) and its symbols serve libraries loaded later. It returns 0, or -1
// with dlerror's message in err (NUL-terminated, truncated to cap).
static int wf_dlopen(const char* path, char* err, int cap) {
	if (dlopen(path, RTLD_NOW | RTLD_GLOBAL) != NULL) return 0;
	const char* msg = dlerror();
	if (msg == NULL) msg = "dlopen failed";
	if (cap > 0) {
		strncpy(err, msg, cap - 1);
		err[cap - 1] = 0;
	}
	return -1;
}
*/
import "C"

import "unsafe"

// MallocRetain sets glibc malloc's M_MMAP_THRESHOLD and M_TRIM_THRESHOLD
// (mallopt) to the given byte counts, for the whole process. It reports
// false when the C library is not glibc or refused a value.
func MallocRetain(mmapThreshold, trimThreshold int) bool {
	return C.wf_malloc_retain(C.int(mmapThreshold), C.int(trimThreshold)) == 1
}

// BLASThreads sets OpenBLAS's own thread count to n when n > 0 and returns
// its thread count, or -1 when the process has no OpenBLAS.
func BLASThreads(n int) int { return int(C.wf_blas_threads(C.int(n))) }

// Dlopen loads the shared library at path (a name without '/' is searched
// as dlopen searches) into the process with RTLD_NOW | RTLD_GLOBAL. A
// library stays loaded; loading it again does nothing. The error is
// dlerror's message.
func Dlopen(path string) error {
	cpath := C.CString(path)
	defer C.free(unsafe.Pointer(cpath))
	var buf [1024]C.char
	if C.wf_dlopen(cpath, &buf[0], C.int(len(buf))) != 0 {
		return dlError(C.GoString(&buf[0]))
	}
	return nil
}

// dlError is dlopen's message.
type dlError string

func (e dlError) Error() string { return string(e) }
