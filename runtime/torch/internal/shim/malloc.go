package shim

/*
#include <malloc.h>

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
*/
import "C"

// MallocRetain sets glibc malloc's M_MMAP_THRESHOLD and M_TRIM_THRESHOLD
// (mallopt) to the given byte counts, for the whole process. It reports
// false when the C library is not glibc or refused a value.
func MallocRetain(mmapThreshold, trimThreshold int) bool {
	return C.wf_malloc_retain(C.int(mmapThreshold), C.int(trimThreshold)) == 1
}
