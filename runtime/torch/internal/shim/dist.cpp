// dist.cpp — libtorch's c10d process groups for Go workers (see dist.h).
// Kept apart from shim.cpp so that each compiles on its own; the policy
// (which backend, which device, timeouts, checking that ranks agree) lives
// in Go (packages runtime/dist and runtime/torch).
//
// ProcessGroupGloo.hpp declares nothing without USE_C10D_GLOO, which
// dist.go defines for the whole package; its own headers come from Debian's
// libgloo-dev. ProcessGroupNCCL.hpp is used only when the build defines
// USE_C10D_NCCL (a CUDA libtorch with NCCL, built with -tags libtorch_custom
// and the define in CGO_CPPFLAGS).
#include "dist.h"
#include "hook.h"

// shim.cpp's check, which go build may reach after this file's: without
// libtorch's headers say what is missing rather than name some c10d header.
#if !__has_include(<torch/script.h>) || !__has_include(<torch/all.h>) || !__has_include(<torch/version.h>)
#error "wfgen: libtorch headers not found (torch/script.h in libtorch's include directory, torch/all.h in include/torch/csrc/api/include). Install Debian's libtorch-dev, or build with -tags libtorch_custom and CGO_CXXFLAGS/CGO_LDFLAGS pointing at your libtorch (scripts/libtorch-pc.sh writes them as a libtorch.pc): see docs/engine.md, \"Finding libtorch\"."
#endif
#if !__has_include(<gloo/config.h>)
#error "wfgen: Gloo's headers (gloo/config.h) not found: install Debian's libgloo-dev (scripts/setup.sh does), or add your libtorch's third_party gloo include directory to CGO_CXXFLAGS; see docs/processes.md, \"Process groups\"."
#endif

#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#include <torch/version.h>
#ifdef USE_C10D_NCCL
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif

#include <ATen/ATen.h>
#include <c10/core/DeviceGuard.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

// The backend interface: 2.x's process groups hold backends
// (ProcessGroupGloo derives from c10d::Backend), 1.x's were the backends.
#if WF_TORCH_AT_LEAST(2, 0)
using Backend = c10d::Backend;
#else
using Backend = c10d::ProcessGroup;
#endif

std::vector<std::string> split_list(const std::string& s) {
  std::vector<std::string> parts;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (!item.empty()) parts.push_back(item);
  }
  return parts;
}

}  // namespace

struct wf_group {
  c10::intrusive_ptr<c10d::Store> store;
  c10::intrusive_ptr<Backend> backend;
  c10::Device device = c10::Device(c10::kCPU);
  int size = 0;
  // The op_id whose wait must end (wf_dist_cancel); 0 is none.
  std::atomic<int64_t> cancel{0};
};

namespace {

// Waits for w until it completes, timeout_ms elapses or wf_dist_cancel names
// op_id. Work::wait(timeout) returns as soon as the work completes, so the
// slices cost no latency; they only bound how late a cancellation is seen.
void wait_for(wf_group* g, const c10::intrusive_ptr<c10d::Work>& w, int64_t op_id, int64_t timeout_ms,
              const char* what) {
  using clock = std::chrono::steady_clock;
  const auto deadline = clock::now() + std::chrono::milliseconds(timeout_ms);
  const auto slice = std::chrono::milliseconds(50);
  for (;;) {
    if (g->cancel.load() == op_id) throw std::runtime_error(std::string(what) + ": cancelled");
    auto now = clock::now();
    if (now >= deadline) {
      throw std::runtime_error(std::string(what) + ": timed out after " + std::to_string(timeout_ms) +
                               " ms waiting for the other ranks (a rank died, is stuck, or called another "
                               "collective)");
    }
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now);
    auto step = std::max(std::chrono::milliseconds(1), std::min(slice, left));
    try {
      w->wait(step);
      return;
    } catch (...) {
      // A slice that ran out throws "Operation timed out!" while the work is
      // still running; a work that completed rethrows its own failure.
      if (w->isCompleted()) {
        w->wait();
        return;
      }
    }
  }
}

// on_device copies a host tensor to the group's device (NCCL), else returns it.
at::Tensor on_device(const wf_group* g, const at::Tensor& t) {
  if (g->device.is_cpu()) return t;
  return t.to(g->device, /*non_blocking=*/false, /*copy=*/true);
}

// to_host copies t to the given host memory.
void to_host(const at::Tensor& t, void* dst) {
  at::Tensor h = t.device().is_cpu() ? t.contiguous() : t.to(c10::kCPU).contiguous();
  size_t n = static_cast<size_t>(h.numel()) * h.element_size();
  if (n) std::memcpy(dst, h.data_ptr(), n);
}

at::Tensor bytes_tensor(const void* src, int64_t nbytes) {
  if (nbytes < 0) throw std::invalid_argument("negative byte count");
  at::Tensor t = at::empty({nbytes}, at::TensorOptions().dtype(at::kByte));
  if (nbytes) std::memcpy(t.data_ptr(), src, static_cast<size_t>(nbytes));
  return t;
}

void check_root(const wf_group* g, int32_t root) {
  if (root < 0 || root >= g->size)
    throw std::invalid_argument("root rank " + std::to_string(root) + " is outside the group of " +
                                std::to_string(g->size));
}

}  // namespace

extern "C" {

int32_t wf_dist_backends(void) {
  int32_t b = WF_DIST_GLOO;
#ifdef USE_C10D_NCCL
  b |= WF_DIST_NCCL;
#endif
  return b;
}

wf_group* wf_dist_join(int32_t backend, const char* host, int64_t host_len, int32_t port, int32_t host_store,
                       const char* prefix, int64_t prefix_len, int32_t rank, int32_t size, int64_t join_timeout_ms,
                       int64_t timeout_ms, const char* device, int64_t device_len, const char* ifaces,
                       int64_t ifaces_len, char* out, int64_t cap, wf_result* res) {
  wf_group* result = nullptr;
  wf_shim::guarded(out, cap, res, [&] {
    if (size < 1 || rank < 0 || rank >= size)
      throw std::invalid_argument("rank " + std::to_string(rank) + " is outside a group of " + std::to_string(size));
    if (port < 1 || port > 65535) throw std::invalid_argument("port " + std::to_string(port) + " is not a port");
    if (timeout_ms < 1 || join_timeout_ms < 1) throw std::invalid_argument("timeouts must be positive");
    if (backend != WF_DIST_GLOO && backend != WF_DIST_NCCL)
      throw std::invalid_argument("unknown backend code " + std::to_string(backend));
#ifndef USE_C10D_NCCL
    if (backend == WF_DIST_NCCL)
      throw std::invalid_argument("this libtorch build has no NCCL (the shim was compiled without USE_C10D_NCCL)");
#endif
    auto timeout = std::chrono::milliseconds(timeout_ms);
    auto g = std::make_unique<wf_group>();
    g->size = size;
    g->device = c10::Device(std::string(device, device_len));

    c10d::TCPStoreOptions so;
    so.port = static_cast<uint16_t>(port);
    so.isServer = host_store != 0;
    so.numWorkers = static_cast<size_t>(size);
    so.waitWorkers = true;
    so.timeout = std::chrono::milliseconds(join_timeout_ms);
    so.multiTenant = true;
#if WF_TORCH_AT_LEAST(2, 2)
    // The option exists from 2.2 and is on by default from 2.4; Debian's 2.6
    // is built without libuv. The classic store is what torchrun's
    // bootstrap makes the launcher use too.
    so.useLibUV = false;
#endif
    auto tcp = c10::make_intrusive<c10d::TCPStore>(std::string(host, host_len), so);
    g->store = c10::make_intrusive<c10d::PrefixStore>(std::string(prefix, prefix_len), tcp);

    if (backend == WF_DIST_GLOO) {
      if (!g->device.is_cpu())
        throw std::invalid_argument("the gloo backend runs collectives on the cpu, not " + g->device.str());
      auto opts = c10d::ProcessGroupGloo::Options::create(timeout);
      auto names = split_list(std::string(ifaces, ifaces_len));
      for (const auto& name : names) opts->devices.push_back(c10d::ProcessGroupGloo::createDeviceForInterface(name));
      if (names.empty()) opts->devices.push_back(c10d::ProcessGroupGloo::createDefaultDevice());
      g->backend = c10::make_intrusive<c10d::ProcessGroupGloo>(g->store, rank, size, opts);
    } else {
#ifdef USE_C10D_NCCL
      if (!g->device.is_cuda()) throw std::invalid_argument("the nccl backend needs a cuda device, not " + g->device.str());
      c10::DeviceGuard guard(g->device);
      auto opts = c10d::ProcessGroupNCCL::Options::create();
      opts->timeout = timeout;
      g->backend = c10::make_intrusive<c10d::ProcessGroupNCCL>(g->store, rank, size, opts);
#endif
    }
    result = g.release();
  });
  return result;
}

void wf_dist_close(wf_group* g) {
  try {
    delete g;
  } catch (...) {
  }
}

void wf_dist_cancel(wf_group* g, int64_t op_id) { g->cancel.store(op_id); }

void wf_dist_all_reduce(wf_group* g, int64_t op_id, void* data, int32_t dtype, int64_t numel, int32_t op,
                        int64_t timeout_ms, char* out, int64_t cap, wf_result* res) {
  wf_shim::guarded(out, cap, res, [&] {
    at::ScalarType st;
    if (!wf_shim::dtype_from_code(dtype, &st)) throw std::invalid_argument("unknown dtype code " + std::to_string(dtype));
    if (numel < 0) throw std::invalid_argument("negative element count");
    c10d::AllreduceOptions opts;
    switch (op) {
      case WF_DIST_SUM: opts.reduceOp = c10d::ReduceOp::SUM; break;
      case WF_DIST_PRODUCT: opts.reduceOp = c10d::ReduceOp::PRODUCT; break;
      case WF_DIST_MIN: opts.reduceOp = c10d::ReduceOp::MIN; break;
      case WF_DIST_MAX: opts.reduceOp = c10d::ReduceOp::MAX; break;
      default: throw std::invalid_argument("unknown reduce op " + std::to_string(op));
    }
    opts.timeout = std::chrono::milliseconds(timeout_ms);
    at::Tensor t = at::empty({numel}, at::TensorOptions().dtype(st));
    size_t nbytes = static_cast<size_t>(numel) * t.element_size();
    if (nbytes) std::memcpy(t.data_ptr(), data, nbytes);
    c10::OptionalDeviceGuard guard;
    if (!g->device.is_cpu()) guard.reset_device(g->device);
    std::vector<at::Tensor> ts{on_device(g, t)};
    auto w = g->backend->allreduce(ts, opts);
    wait_for(g, w, op_id, timeout_ms, "all_reduce");
    to_host(ts[0], data);
  });
}

void wf_dist_broadcast(wf_group* g, int64_t op_id, void* data, int64_t nbytes, int32_t root, int64_t timeout_ms,
                       char* out, int64_t cap, wf_result* res) {
  wf_shim::guarded(out, cap, res, [&] {
    check_root(g, root);
    c10d::BroadcastOptions opts;
    opts.rootRank = root;
    opts.timeout = std::chrono::milliseconds(timeout_ms);
    c10::OptionalDeviceGuard guard;
    if (!g->device.is_cpu()) guard.reset_device(g->device);
    std::vector<at::Tensor> ts{on_device(g, bytes_tensor(data, nbytes))};
    auto w = g->backend->broadcast(ts, opts);
    wait_for(g, w, op_id, timeout_ms, "broadcast");
    to_host(ts[0], data);
  });
}

void wf_dist_all_gather(wf_group* g, int64_t op_id, const void* in, int64_t nbytes, void* all, int64_t timeout_ms,
                        char* out, int64_t cap, wf_result* res) {
  wf_shim::guarded(out, cap, res, [&] {
    c10d::AllgatherOptions opts;
    opts.timeout = std::chrono::milliseconds(timeout_ms);
    c10::OptionalDeviceGuard guard;
    if (!g->device.is_cpu()) guard.reset_device(g->device);
    std::vector<at::Tensor> inputs{on_device(g, bytes_tensor(in, nbytes))};
    std::vector<std::vector<at::Tensor>> outputs(1);
    for (int r = 0; r < g->size; r++) outputs[0].push_back(at::empty_like(inputs[0]));
    auto w = g->backend->allgather(outputs, inputs, opts);
    wait_for(g, w, op_id, timeout_ms, "all_gather");
    char* dst = static_cast<char*>(all);
    for (int r = 0; r < g->size; r++) to_host(outputs[0][r], dst + static_cast<size_t>(r) * nbytes);
  });
}

void wf_dist_gather(wf_group* g, int64_t op_id, const void* in, int64_t nbytes, void* all, int32_t root,
                    int64_t timeout_ms, char* out, int64_t cap, wf_result* res) {
  wf_shim::guarded(out, cap, res, [&] {
    check_root(g, root);
    c10d::GatherOptions opts;
    opts.rootRank = root;
    opts.timeout = std::chrono::milliseconds(timeout_ms);
    c10::OptionalDeviceGuard guard;
    if (!g->device.is_cpu()) guard.reset_device(g->device);
    std::vector<at::Tensor> inputs{on_device(g, bytes_tensor(in, nbytes))};
    std::vector<std::vector<at::Tensor>> outputs;
    if (all != nullptr) {
      outputs.resize(1);
      for (int r = 0; r < g->size; r++) outputs[0].push_back(at::empty_like(inputs[0]));
    }
    auto w = g->backend->gather(outputs, inputs, opts);
    wait_for(g, w, op_id, timeout_ms, "gather");
    char* dst = static_cast<char*>(all);
    if (dst != nullptr) {
      for (int r = 0; r < g->size; r++) to_host(outputs[0][r], dst + static_cast<size_t>(r) * nbytes);
    }
  });
}

}  // extern "C"
