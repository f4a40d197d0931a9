/* hook.h — shim.cpp's value conversion and error convention for the shim's
 * other C++ files (aoti.cpp, dist.cpp), so that each rule has one copy.
 * C++ only; defined at the end of shim.cpp. */
#ifndef WFGEN_TORCH_HOOK_H
#define WFGEN_TORCH_HOOK_H

#include "shim.h"

#include <ATen/core/ivalue.h>
#include <torch/version.h>

#include <functional>
#include <vector>

// True when the libtorch compiled against is at least major.minor.
#define WF_TORCH_AT_LEAST(major, minor) \
  (TORCH_VERSION_MAJOR > (major) || (TORCH_VERSION_MAJOR == (major) && TORCH_VERSION_MINOR >= (minor)))

namespace wf_shim {
/* Runs body and turns every exception into a status and message in res
 * (WF_OOM for allocation failures), as every shim entry point does. */
void guarded(char* out, int64_t cap, wf_result* res, const std::function<void()>& body) noexcept;
/* Reads the argument named name, a list of tensors, from a kwargs blob and
 * copies the tensors onto device. */
std::vector<at::Tensor> read_tensor_list(const char* args, int64_t args_len, const char* name, void* const* ptrs,
                                         int64_t nptrs, c10::Device device);
/* Writes v as the payload (a value blob) with status WF_OK. */
void emit_value(char* out, int64_t cap, wf_result* res, const c10::IValue& v);
/* The scalar type of a value blob's dtype code (shim.h); false for an
 * unknown code. */
bool dtype_from_code(int32_t code, at::ScalarType* st);
}  // namespace wf_shim

#endif
