/* A stand-in for the CUDA runtime (libcudart) used by cuda_test.go to check
 * the engine's dlsym path without a GPU: two devices, device 1 current,
 * per-device memory figures, and a synchronize that fails on device 0.
 * Emptying the caching allocator's cache frees 256 MiB on every device:
 * through libtorch 1.x's exported emptyCache function here, or, built with
 * -DFAKE_TORCH2, through libtorch 2.x's allocator object when
 * fakecudart_torch2.cpp is linked in (neither without it). */
#include <stddef.h>
#include <string.h>

static int current = 1;
size_t fake_released_bytes = 0;

int cudaGetDeviceCount(int* n) { *n = 2; return 0; }
int cudaGetDevice(int* d) { *d = current; return 0; }
int cudaSetDevice(int d) {
  if (d < 0 || d > 1) return 101; /* cudaErrorInvalidDevice */
  current = d;
  return 0;
}
int cudaDeviceGetAttribute(int* v, int attr, int dev) {
  if (dev < 0 || dev > 1) return 101;
  if (attr == 75) { *v = dev == 0 ? 7 : 8; return 0; } /* major */
  if (attr == 76) { *v = dev == 0 ? 5 : 6; return 0; } /* minor */
  return 1;
}
int cudaMemGetInfo(size_t* free_b, size_t* total_b) {
  *free_b = ((size_t)(current + 1) << 30) + fake_released_bytes;
  *total_b = (size_t)(current + 1) << 32;
  return 0;
}
int cudaGetDeviceProperties(void* props, int dev) {
  if (dev < 0 || dev > 1) return 101;
  strcpy((char*)props, dev == 0 ? "Fake T4" : "Fake A100");
  return 0;
}
int cudaDeviceSynchronize(void) { return current == 0 ? 700 : 0; } /* 700: illegal address */
const char* cudaGetErrorString(int code) {
  if (code == 700) return "an illegal memory access was encountered";
  if (code == 101) return "invalid device ordinal";
  return "unknown error";
}
#ifndef FAKE_TORCH2
void fake_empty_cache(void) __asm__("_ZN3c104cuda20CUDACachingAllocator10emptyCacheEv");
void fake_empty_cache(void) { fake_released_bytes += (size_t)256 << 20; }
#endif
