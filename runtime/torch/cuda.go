//go:build cgo

package torch

import (
	"fmt"
	"sync"

	"github.com/worldfoundry/wfgen/runtime/torch/internal/shim"

	"github.com/worldfoundry/wfgen/runtime/engine"
)

// cudaAPI is what the engine asks about CUDA. The CPU build of libtorch
// answers "no devices"; the rest goes to the CUDA runtime C API resolved by
// dlsym, so the CPU build links and the same code runs on a GPU build.
type cudaAPI interface {
	deviceCount() int
	currentDevice() (int, error)
	device(i int) (engine.DeviceInfo, error)
	synchronize(i int) error
	emptyCache() error
}

// torchCUDA asks libtorch's CUDA hooks whether CUDA is there and how many
// devices it sees, and the CUDA runtime (found in the process, where
// libtorch_cuda loaded it) for the rest.
type torchCUDA struct {
	once sync.Once
	rt   *cudartCUDA
	err  error
}

func (t *torchCUDA) runtime() (*cudartCUDA, error) {
	t.once.Do(func() {
		t.rt, t.err = openCUDART("")
		if t.err == nil {
			t.rt.requireEmptyCache = true
		}
	})
	return t.rt, t.err
}

func (t *torchCUDA) deviceCount() int { return shim.CUDADeviceCount() }

func (t *torchCUDA) currentDevice() (int, error) {
	if shim.CUDADeviceCount() == 0 {
		return 0, errNoCUDA
	}
	i, res := shim.CUDACurrentDevice(make([]byte, 512))
	if res.Status != statusOK {
		return 0, newError("current CUDA device", "", "", res.Status, string(res.Payload))
	}
	return i, nil
}

func (t *torchCUDA) device(i int) (engine.DeviceInfo, error) {
	rt, err := t.runtime()
	if err != nil {
		return engine.DeviceInfo{}, err
	}
	return rt.device(i)
}

func (t *torchCUDA) synchronize(i int) error {
	rt, err := t.runtime()
	if err != nil {
		return err
	}
	return rt.synchronize(i)
}

func (t *torchCUDA) emptyCache() error {
	rt, err := t.runtime()
	if err != nil {
		return err
	}
	return rt.emptyCache()
}

// cudartCUDA answers everything from one CUDA runtime library.
type cudartCUDA struct {
	lib string
	c   shim.CUDART
	// requireEmptyCache makes a missing emptyCache symbol an error.
	requireEmptyCache bool
}

// openCUDART resolves the CUDA runtime from path ("" = the process, then
// libcudart.so*).
func openCUDART(path string) (*cudartCUDA, error) {
	c, res := shim.OpenCUDART(path)
	if res.Status != statusOK {
		return nil, fmt.Errorf("torch: CUDA runtime: %s", res.Payload)
	}
	name := path
	if name == "" {
		name = "libcudart"
	}
	return &cudartCUDA{lib: name, c: c}, nil
}

func (r *cudartCUDA) deviceCount() int {
	n, res := r.c.DeviceCount()
	if res.Status != statusOK {
		return 0
	}
	return n
}

func (r *cudartCUDA) currentDevice() (int, error) {
	i, res := r.c.CurrentDevice()
	if res.Status != statusOK {
		return 0, newError("current device", r.lib, "", res.Status, string(res.Payload))
	}
	return i, nil
}

func (r *cudartCUDA) device(i int) (engine.DeviceInfo, error) {
	d, res := r.c.Device(i)
	if res.Status != statusOK {
		return engine.DeviceInfo{}, newError("device", fmt.Sprintf("cuda:%d", i), "", res.Status, string(res.Payload))
	}
	return engine.DeviceInfo{Index: i, Name: d.Name, Major: d.Major, Minor: d.Minor,
		FreeBytes: d.FreeBytes, TotalBytes: d.TotalBytes}, nil
}

func (r *cudartCUDA) synchronize(i int) error {
	if res := r.c.Synchronize(i); res.Status != statusOK {
		return newError("synchronize", fmt.Sprintf("cuda:%d", i), "", res.Status, string(res.Payload))
	}
	return nil
}

func (r *cudartCUDA) emptyCache() error {
	called, res := r.c.EmptyCache()
	switch {
	case res.Status != statusOK:
		return newError("empty cache", r.lib, "", res.Status, string(res.Payload))
	case !called && r.requireEmptyCache:
		return fmt.Errorf("torch: empty CUDA cache: not found: neither libtorch 1.x's c10::cuda::CUDACachingAllocator::emptyCache " +
			"nor 2.x's CUDACachingAllocator::allocator with torch::cuda::CUDAPluggableAllocator's vtable")
	}
	return nil
}
