/* shim.h — the C boundary between Go and libtorch (C++17, see shim.cpp).
 *
 * Every entry point catches all C++ exceptions; errors come back in the
 * wf_result of the same call, never through thread-local state. Values cross
 * the boundary as one byte blob per direction (format in value.go of package
 * runtime/torch); tensor input data is referenced by index into an array of
 * pointers to (pinned) caller memory and copied into libtorch-owned memory. */
#ifndef WFGEN_TORCH_SHIM_H
#define WFGEN_TORCH_SHIM_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

enum { WF_OK = 0, WF_ERROR = 1, WF_OOM = 2 };

/* Result of a call. The payload (a value blob on success, a UTF-8 message on
 * failure) is written to the caller's buffer when it fits (overflow == NULL),
 * otherwise to a malloc'd block the caller frees with wf_free. */
typedef struct {
  int32_t status;
  int64_t size;
  void* overflow;
} wf_result;

typedef struct wf_module wf_module;

/* Process-global libtorch flags read and written through at::globalContext(). */
typedef struct {
  int32_t matmul_precision; /* 0 highest, 1 high, 2 medium */
  int32_t allow_tf32_cublas; /* derived by libtorch from matmul_precision; read only */
  int32_t allow_tf32_cudnn;
  int32_t flash_sdp;
  int32_t math_sdp;
  int32_t deterministic;
  int32_t deterministic_warn_only;
  int32_t deterministic_cudnn;
  int32_t benchmark_cudnn;
} wf_flags;

typedef struct {
  char name[256];
  int32_t major, minor;
  uint64_t free_bytes, total_bytes;
} wf_device_info;

typedef struct wf_cudart wf_cudart;

/* Sets intra-op (and, when > 0, inter-op) threads and whether TorchScript
 * may fuse on the CPU (torch::jit::overrideCanFuseOnCPU); payload is
 * libtorch's parallel info. */
void wf_init(int32_t threads, int32_t interop_threads, int32_t cpu_fusion, char* out, int64_t cap,
             wf_result* res);
/* Whether TorchScript fuses on the CPU (torch::jit::canFuseOnCPU: the switch
 * and a CPU fusion backend, i.e. libtorch built with LLVM). */
int32_t wf_cpu_fusion(void);
/* The libtorch version the shim was compiled against, e.g. "1.13.0", and its
 * numbers (TORCH_VERSION_MAJOR, _MINOR, _PATCH of torch/version.h). */
const char* wf_version(void);
int32_t wf_version_major(void);
int32_t wf_version_minor(void);
int32_t wf_version_patch(void);
/* Enters and leaves the CUDA autocast scope wf_call uses for a dtype code and
 * reports the CUDA autocast state (enabled, dtype code) inside it in
 * state[0..1] and after it in state[2..3]. Needs no device: autocast state is
 * thread-local flags. */
void wf_autocast_probe(int32_t dtype, int32_t state[4]);

wf_module* wf_load(const char* path, int64_t path_len, const char* device, int64_t device_len,
                   int32_t dtype, char* out, int64_t cap, wf_result* res);
/* Calls a method. Tensor data is at ptrs[i]; a call with one tensor may pass
 * ptrs == NULL, nptrs == 1 and the data pointer as only_ptr instead, which
 * lets Go pass it as a plain argument without pinning it. */
void wf_call(wf_module* m, const char* method, int64_t method_len, const char* args, int64_t args_len,
             void* const* ptrs, int64_t nptrs, void* only_ptr, int32_t autocast_dtype, char* out,
             int64_t cap, wf_result* res);
#ifdef WF_BENCH
/* Benchmark loops, compiled only with -tags wfbench (WF_BENCH). */
/* Runs a method n times in C++ the way a plain C++ program would (copy the
 * host inputs into tensors, call, copy tensor outputs to a host buffer) and
 * returns the elapsed nanoseconds, or -1 with res set on failure. */
int64_t wf_bench_raw(wf_module* m, const char* method, int64_t method_len, const char* args,
                     int64_t args_len, void* const* ptrs, int64_t nptrs, int64_t n, char* out,
                     int64_t cap, wf_result* res);
/* Runs wf_call n times in a C++ loop: the shim's own per-call cost without
 * crossing into Go. Elapsed nanoseconds, or -1 with res set. */
int64_t wf_bench_call(wf_module* m, const char* method, int64_t method_len, const char* args, int64_t args_len,
                      void* const* ptrs, int64_t nptrs, int64_t n, char* out, int64_t cap, wf_result* res);
#endif

void wf_close(wf_module* m);
void wf_free(void* p);

/* level 0: freeze; 1: freeze + conv-add-relu fusion + frozen linear
 * transpose (libtorch's optimize_for_inference without its MKLDNN layout
 * conversion, which wfgen refuses). */
wf_module* wf_compile(wf_module* m, int32_t level, char* out, int64_t cap, wf_result* res);
void wf_save(wf_module* m, const char* path, int64_t path_len, char* out, int64_t cap, wf_result* res);
void wf_define(const char* source, int64_t source_len, const char* tensors, int64_t tensors_len,
               void* const* ptrs, int64_t nptrs, const char* path, int64_t path_len, char* out,
               int64_t cap, wf_result* res);

void wf_flags_get(wf_flags* f);
void wf_flags_set(const wf_flags* f, char* out, int64_t cap, wf_result* res);

int32_t wf_cuda_available(void);
int32_t wf_cuda_device_count(void);
int64_t wf_cuda_current_device(char* out, int64_t cap, wf_result* res);

/* Resolves the CUDA runtime C API: from `path` when not empty, else from the
 * symbols already loaded in the process, else libcudart.so*. NULL plus a
 * message in err when not found. */
wf_cudart* wf_cudart_open(const char* path, int64_t path_len, char* out, int64_t cap, wf_result* res);
/* Like every shim entry point these report through res: WF_OK, WF_ERROR or
 * WF_OOM (CUDA's cudaErrorMemoryAllocation) with the message as payload. */
void wf_cudart_device_count(wf_cudart* c, int32_t* count, char* out, int64_t cap, wf_result* res);
void wf_cudart_current_device(wf_cudart* c, int32_t* index, char* out, int64_t cap, wf_result* res);
void wf_cudart_device(wf_cudart* c, int32_t index, wf_device_info* info, char* out, int64_t cap, wf_result* res);
void wf_cudart_synchronize(wf_cudart* c, int32_t index, char* out, int64_t cap, wf_result* res);
/* Empties libtorch's CUDA caching allocator (the exported emptyCache function
 * of libtorch 1.x, the allocator object's virtual emptyCache in 2.x); called
 * is 1 when it was found and called, 0 when neither is there. */
void wf_cudart_empty_cache(wf_cudart* c, int32_t* called, char* out, int64_t cap, wf_result* res);

#ifdef __cplusplus
}
#endif

#endif
