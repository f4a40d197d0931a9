package engine

import (
	"context"
	"errors"
	"fmt"

	"github.com/worldfoundry/wfgen/runtime/spec"
	"github.com/worldfoundry/wfgen/runtime/tensor"
)

// Sentinel errors shared by every layer; test with errors.Is.
var (
	// ErrNoEngine means no execution engine is linked into the process.
	ErrNoEngine = errors.New("no execution engine: import _ \"github.com/worldfoundry/wfgen/runtime/torch\" " +
		"and build with CGO_ENABLED=1 and libtorch installed (Debian: apt-get install libtorch-dev)")
	// ErrOutOfMemory means an allocation failed on the device (or host for CPU).
	ErrOutOfMemory = errors.New("out of memory")
	// ErrClosed means a module or client was used after Close.
	ErrClosed = errors.New("use after close")
)

// LoadOptions say where and how a module is loaded.
type LoadOptions struct {
	// Device is a resolved device string such as "cpu" or "cuda:1".
	Device string
	// DType, when set, casts floating parameters and buffers to it; integer
	// buffers keep their dtype. A compiled (AOTInductor) checkpoint cannot
	// be cast: a dtype other than its own is an error.
	DType tensor.DType
	// Format is the checkpoint's declared format; "" recognises it from the
	// file (ResolveFormat).
	Format spec.CheckpointFormat
	// OpLibraries are shared libraries of TorchScript custom ops to load
	// before the checkpoint (a manifest's op_libraries, resolved to
	// paths), after those EnvOpLibraries lists. Each library is loaded
	// once per process; a library cannot be unloaded.
	OpLibraries []string
}

// CallOptions apply to one method call.
type CallOptions struct {
	// Autocast enables CUDA autocast with AutocastDType for this call; it is a
	// no-op on CPU and other devices.
	Autocast bool
	// AutocastDType is the autocast dtype (float16 or bfloat16).
	AutocastDType tensor.DType
	// Outputs, when not nil, is reused memory for the call's output tensors
	// instead of fresh memory: they share it until the next call given the
	// same buffer (see OutputBuffer). Engines that cannot use it ignore it.
	Outputs *tensor.OutputBuffer
}

// Argument describes one argument of a TorchScript method schema.
type Argument struct {
	// Name is the argument name.
	Name string `json:"name"`
	// Type is the TorchScript type as printed by the schema, e.g. "int",
	// "Tensor", "List[float]", "Optional[str]".
	Type string `json:"type"`
	// HasDefault says whether the schema gives a default value.
	HasDefault bool `json:"has_default"`
	// Default is the default value in the engine value form (see Module.Call).
	Default any `json:"default,omitempty"`
}

// MethodSchema is the signature of one TorchScript method, without self.
type MethodSchema struct {
	// Name is the method name.
	Name string `json:"name"`
	// Arguments are the method's arguments in order, without self.
	Arguments []Argument `json:"arguments"`
	// Returns are the return types; one entry for a single (or tuple) return.
	Returns []string `json:"returns"`
}

// Module is a loaded model. Its methods are safe for concurrent use.
//
// Values crossing the boundary (keyword arguments and outputs) are one of:
// nil, string, int64, float64, bool, *Tensor, []any (lists and tuples) and
// map[string]any (dicts with string keys).
type Module interface {
	// Methods lists the module's method names, sorted.
	Methods() []string
	// Schema returns the schema of one method.
	Schema(method string) (MethodSchema, error)
	// Call runs one method with keyword arguments and returns its output.
	Call(ctx context.Context, method string, kwargs map[string]any, opts CallOptions) (any, error)
	// Device is the device the module lives on.
	Device() string
	// Close releases the module; later calls return ErrClosed.
	Close() error
}

// DeviceInfo describes one accelerator.
type DeviceInfo struct {
	// Index is the device index.
	Index int
	// Name is the device name.
	Name string
	// Major and Minor are the compute capability.
	Major, Minor int
	// FreeBytes and TotalBytes are the device memory figures.
	FreeBytes, TotalBytes uint64
}

// Engine is an execution backend, registered by name with Register: a
// small required core. What only some engines can do is an optional interface
// that callers find by type assertion, as database/sql/driver does:
// CUDAEngine (CUDA devices), CacheReleaser (returning cached accelerator
// memory), Synchronizer (waiting for a device) and infra.FlagEngine (the
// process-global flags). Helpers such as CUDADevices answer for any engine.
type Engine interface {
	// Name identifies the engine, e.g. "libtorch".
	Name() string
	// Version is the backend version, e.g. "1.13.1".
	Version() string
	// Formats lists the checkpoint formats Load reads, the engine's
	// preferred first.
	Formats() []spec.CheckpointFormat
	// Load loads a checkpoint onto a device, in the format opts.Format
	// says (one of Formats) or, when that is "", the one the file is.
	Load(path string, opts LoadOptions) (Module, error)
}

// CUDAEngine is an engine that can see CUDA devices.
type CUDAEngine interface {
	Engine
	// CUDADeviceCount returns how many CUDA devices are visible (0 on CPU builds).
	CUDADeviceCount() int
	// CUDACurrentDevice returns the process's current CUDA device index.
	CUDACurrentDevice() (int, error)
	// CUDADevice returns capability and memory of one CUDA device.
	CUDADevice(index int) (DeviceInfo, error)
}

// CacheReleaser is an engine that keeps freed accelerator memory cached.
type CacheReleaser interface {
	// EmptyCache returns unreferenced cached accelerator memory to the device.
	EmptyCache() error
}

// CacheDirer is an engine that keeps what it compiled or measured for this
// machine in a folder (the libtorch engine: its compile cache), where
// runtime/client keeps its measurements of a model too.
type CacheDirer interface {
	// CacheDir returns the folder, "" when caching is off.
	CacheDir() string
}

// Synchronizer is an engine that queues work on devices.
type Synchronizer interface {
	// Synchronize waits for all work queued on device to finish (no-op on CPU).
	Synchronize(device string) error
}

// Compiler is an engine that can compile a loaded module for inference
// (freeze and fuse, cached on disk): the seed's compile_module_if_enabled.
type Compiler interface {
	// Compile returns m compiled as c asks, m itself when compilation is
	// off (c's fields fall back to the engine's environment variables,
	// WORLDFOUNDRY_TORCH_COMPILE and friends), or an error. A module it
	// returns other than m is the caller's, alongside m.
	Compile(m Module, c spec.CompileSpec) (Module, error)
}

// CUDADevices returns how many CUDA devices e sees: 0 for an engine that is
// not a CUDAEngine.
func CUDADevices(e Engine) int {
	if c, ok := e.(CUDAEngine); ok {
		return c.CUDADeviceCount()
	}
	return 0
}

// ErrNoCUDA means the engine has no CUDA support.
var ErrNoCUDA = errors.New("the engine has no CUDA support")

// AsCUDA returns e's CUDA queries, or ErrNoCUDA for an engine without them.
func AsCUDA(e Engine) (CUDAEngine, error) {
	if c, ok := e.(CUDAEngine); ok {
		return c, nil
	}
	return nil, fmt.Errorf("%s: %w", e.Name(), ErrNoCUDA)
}
