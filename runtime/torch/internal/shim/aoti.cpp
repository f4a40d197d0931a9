// aoti.cpp — AOTInductor packages (.pt2) through libtorch's
// torch::inductor::AOTIModelPackageLoader, which libtorch 2.6 exports from
// libtorch_cpu. Against an older libtorch only the stubs at the end are
// compiled: wf_aoti_available says 0 and the Go side refuses such packages
// with the version it was built against. Value blobs and the error
// convention are shim.cpp's (wf_shim in aoti.h).
#include "aoti.h"
#include "hook.h"

#include <torch/version.h>

#include <stdexcept>

#if WF_TORCH_AT_LEAST(2, 6) && __has_include(<torch/csrc/inductor/aoti_package/model_package_loader.h>)
#define WF_AOTI 1
#else
#define WF_AOTI 0
#endif

#if WF_AOTI

#include <ATen/DynamicLibrary.h>
#include <c10/core/DeviceGuard.h>
#include <c10/core/InferenceMode.h>
#include <torch/csrc/inductor/aoti_package/model_package_loader.h>
#include <torch/csrc/inductor/aoti_runtime/interface.h>

#include <memory>
#include <stdexcept>
#include <string>

struct wf_aoti {
  std::unique_ptr<torch::inductor::AOTIModelPackageLoader> loader;
  c10::Device device = c10::Device(c10::kCPU);
};

namespace {

// RunnerAccess reads the compiled model's library and container from a
// runner: AOTIModelContainerRunner keeps them protected and has no call for
// the number of inputs, which the library exports
// (AOTInductorModelContainerGetNumInputs). A pointer to a protected member
// named through a derived class is the standard's way to reach it.
struct RunnerAccess : torch::inductor::AOTIModelContainerRunner {
  static size_t num_inputs(torch::inductor::AOTIModelContainerRunner* r) {
    auto& so = r->*(&RunnerAccess::model_so_);
    auto handle = r->*(&RunnerAccess::container_handle_);
    if (!so || !handle) throw std::runtime_error("AOTInductor package: the compiled model is not loaded");
    auto fn = reinterpret_cast<decltype(&AOTInductorModelContainerGetNumInputs)>(
        so->sym("AOTInductorModelContainerGetNumInputs"));
    size_t n = 0;
    if (fn(handle, &n) != AOTI_RUNTIME_SUCCESS) throw std::runtime_error("AOTInductor package: cannot read its number of inputs");
    return n;
  }
};

c10::Device parse_aoti_device(const std::string& s) {
  c10::Device dev(s.empty() ? std::string("cpu") : s);
  if (!dev.is_cpu() && !dev.is_cuda())
    throw std::invalid_argument("device " + s + ": AOTInductor packages run on cpu or cuda");
  return dev;
}

}  // namespace

extern "C" {

int32_t wf_aoti_available(void) { return 1; }

wf_aoti* wf_aoti_load(const char* path, int64_t path_len, const char* device, int64_t device_len, char* out,
                      int64_t cap, wf_result* res) {
  wf_aoti* result = nullptr;
  wf_shim::guarded(out, cap, res, [&] {
    auto h = std::make_unique<wf_aoti>();
    h->device = parse_aoti_device(std::string(device, device_len));
    // A CUDA package is loaded onto the current device: make it the one asked for.
    c10::OptionalDeviceGuard guard;
    if (h->device.is_cuda() && h->device.has_index()) guard.reset_device(h->device);
    h->loader = std::make_unique<torch::inductor::AOTIModelPackageLoader>(std::string(path, path_len));
    c10::impl::GenericDict info(c10::StringType::get(), c10::StringType::get());
    auto spec = h->loader->get_call_spec();
    if (spec.size() != 2) throw std::runtime_error("AOTInductor package: call spec has " + std::to_string(spec.size()) + " parts, want 2 (inputs, outputs)");
    info.insert("in_spec", spec[0]);
    info.insert("out_spec", spec[1]);
    auto* runner = h->loader->get_runner();
    info.insert("num_inputs", std::to_string(RunnerAccess::num_inputs(runner)));
    for (const auto& kv : h->loader->get_metadata()) info.insert("metadata." + kv.first, kv.second);
    wf_shim::emit_value(out, cap, res, c10::IValue(info));
    result = h.release();
  });
  return result;
}

void wf_aoti_call(wf_aoti* m, const char* args, int64_t args_len, void* const* ptrs, int64_t nptrs,
                  void* only_ptr, char* out, int64_t cap, wf_result* res) {
  wf_shim::guarded(out, cap, res, [&] {
    if (ptrs == nullptr && nptrs == 1) ptrs = &only_ptr;
    c10::InferenceMode mode;
    c10::OptionalDeviceGuard guard;
    if (!m->device.is_cpu()) guard.reset_device(m->device);
    std::vector<at::Tensor> inputs = wf_shim::read_tensor_list(args, args_len, "inputs", ptrs, nptrs, m->device);
    std::vector<at::Tensor> outputs = m->loader->run(inputs);
    wf_shim::emit_value(out, cap, res, c10::IValue(c10::List<at::Tensor>(outputs)));
  });
}

void wf_aoti_close(wf_aoti* m) {
  try {
    delete m;
  } catch (...) {
  }
}

}  // extern "C"

#else  // !WF_AOTI: libtorch before 2.6

struct wf_aoti {};

extern "C" {

int32_t wf_aoti_available(void) { return 0; }

wf_aoti* wf_aoti_load(const char*, int64_t, const char*, int64_t, char* out, int64_t cap, wf_result* res) {
  wf_shim::guarded(out, cap, res, [] {
    throw std::runtime_error("AOTInductor packages need libtorch >= 2.6 (this shim was built against " TORCH_VERSION ")");
  });
  return nullptr;
}

void wf_aoti_call(wf_aoti*, const char*, int64_t, void* const*, int64_t, void*, char* out, int64_t cap,
                  wf_result* res) {
  wf_shim::guarded(out, cap, res, [] { throw std::runtime_error("AOTInductor packages need libtorch >= 2.6"); });
}

void wf_aoti_close(wf_aoti* m) {}

}  // extern "C"

#endif
