/* aoti.h — AOTInductor packages (.pt2, torch._inductor.aoti_compile_and_package)
 * run by libtorch's torch::inductor::AOTIModelPackageLoader (see aoti.cpp).
 *
 * Only a shim compiled against libtorch >= 2.6 runs them (wf_aoti_available);
 * against an older libtorch the functions exist and wf_aoti_load fails. Every
 * entry point reports through a wf_result like shim.h's: status WF_OK,
 * WF_ERROR or WF_OOM, the value blob or the message as payload. */
#ifndef WFGEN_TORCH_AOTI_H
#define WFGEN_TORCH_AOTI_H

#include "shim.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct wf_aoti wf_aoti;

/* 1 when the shim was compiled against a libtorch that runs AOTInductor
 * packages (>= 2.6 with torch/csrc/inductor/aoti_package), else 0. */
int32_t wf_aoti_available(void);

/* Loads a package for device ("cpu", "cuda", "cuda:N"). The payload is a
 * value blob: a Dict[str, str] with "in_spec" and "out_spec" (the package's
 * call spec: torch.utils._pytree treespecs as JSON), "num_inputs" and
 * "num_outputs" (the compiled model's tensor inputs and outputs, decimal)
 * and "metadata.<key>" for every key of the package's metadata (its device
 * under "metadata.AOTI_DEVICE_KEY"). */
wf_aoti* wf_aoti_load(const char* path, int64_t path_len, const char* device, int64_t device_len, char* out,
                      int64_t cap, wf_result* res);

/* Runs the package on the tensors of a kwargs blob holding one argument, a
 * list of tensors in the package's input order (tensor data at ptrs[i], or,
 * with ptrs == NULL and nptrs == 1, at only_ptr, as wf_call). The payload is
 * a value blob: the list of output tensors. */
void wf_aoti_call(wf_aoti* m, const char* args, int64_t args_len, void* const* ptrs, int64_t nptrs,
                  void* only_ptr, char* out, int64_t cap, wf_result* res);

/* Frees a package (and the folder libtorch unpacked it into). */
void wf_aoti_close(wf_aoti* m);

#ifdef __cplusplus
}
#endif

#endif
