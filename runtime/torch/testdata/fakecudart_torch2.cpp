// libtorch 2.x's CUDA caching allocator as cuda_test.go needs it, linked
// into the fake CUDA runtime (fakecudart.c built with -DFAKE_TORCH2): the
// exported std::atomic<CUDAAllocator*> c10::cuda::CUDACachingAllocator::allocator
// pointing at an allocator whose class and vtable are not exported (as
// libc10_cuda's NativeCachingAllocator), and the exported vtable and
// emptyCache of torch::cuda::CUDAPluggableAllocator. The virtual functions
// are fewer than libtorch's, so emptyCache sits in another slot than there:
// the engine must find it, not assume it.
#include <atomic>
#include <cstddef>

extern "C" size_t fake_released_bytes;

namespace c10::cuda::CUDACachingAllocator {
struct CUDAAllocator {
  virtual ~CUDAAllocator() = default;
  virtual void* raw_alloc(size_t nbytes) = 0;
  virtual void init(int device_count) = 0;
  virtual void emptyCache() = 0;
  virtual bool isEnabled() const = 0;
};
std::atomic<CUDAAllocator*> allocator;
}  // namespace c10::cuda::CUDACachingAllocator

namespace torch::cuda::CUDAPluggableAllocator {
struct CUDAPluggableAllocator : c10::cuda::CUDACachingAllocator::CUDAAllocator {
  void* raw_alloc(size_t) override { return nullptr; }
  void init(int) override {}
  void emptyCache() override;
  bool isEnabled() const override { return true; }
  virtual void recordHistory() {}
};
// Out of line: the key function, so the vtable is emitted (and exported) here.
void CUDAPluggableAllocator::emptyCache() {}
}  // namespace torch::cuda::CUDAPluggableAllocator

namespace {
struct NativeAllocator final : c10::cuda::CUDACachingAllocator::CUDAAllocator {
  void* raw_alloc(size_t) override { return nullptr; }
  void init(int) override {}
  void emptyCache() override { fake_released_bytes += size_t{256} << 20; }
  bool isEnabled() const override { return true; }
};
NativeAllocator native;
struct Install {
  Install() { c10::cuda::CUDACachingAllocator::allocator = &native; }
} install;
}  // namespace
