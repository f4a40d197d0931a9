//go:build cgo

package torch

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"

	"github.com/worldfoundry/wfgen/runtime/infra"
	"github.com/worldfoundry/wfgen/runtime/torch/internal/shim"

	"github.com/worldfoundry/wfgen/runtime/engine"
	"github.com/worldfoundry/wfgen/runtime/spec"
)

// The shim's status codes must match the ones errors.go uses.
var _ = [1]struct{}{}[statusOK-shim.OK]
var _ = [1]struct{}{}[statusError-shim.Error]
var _ = [1]struct{}{}[statusOOM-shim.OOM]

// Variables the engine reads once, at its first use.
const (
	// EnvThreads sets libtorch's intra-op thread count (default: libtorch's
	// own, the number of physical cores), and OpenBLAS's unless
	// OPENBLAS_NUM_THREADS is set.
	EnvThreads = "WORLDFOUNDRY_TORCH_THREADS"
	// EnvInteropThreads sets libtorch's inter-op thread count (default:
	// libtorch's own).
	EnvInteropThreads = "WORLDFOUNDRY_TORCH_INTEROP_THREADS"
	// EnvMaxCalls bounds how many calls run inside libtorch at once, across
	// all modules (default GOMAXPROCS).
	EnvMaxCalls = "WORLDFOUNDRY_TORCH_MAX_CALLS"
	// EnvCPUFusion lets TorchScript fuse on the CPU when 1 (default 0: off,
	// torch::jit::overrideCanFuseOnCPU(false)). Fusing needs a libtorch
	// built with LLVM (not Debian's 1.13); Debian's 2.6 has it, and its
	// fuser compile of relu(matmul + b) never returned, hanging the second
	// call of such a module (docs/engine.md, "libtorch versions").
	EnvCPUFusion = "WORLDFOUNDRY_TORCH_CPU_FUSION"
)

// singlePWarning is logged once when the engine starts with GOMAXPROCS=1.
// With a single P, a cgo call that outlasts the Go runtime's 20 µs sysmon
// poll looks like a syscall blocking the only P: sysmon retakes the P during
// every such call and wakes another thread to look for work, which finds
// none and sleeps again, and the call takes the P back when it returns. On
// one CPU those wake-ups preempt libtorch: +58 % on a 90 µs call, +8 % on a
// 670 µs one (docs/benchmarks/engine.md). A second P, idle while the call
// runs, stops it.
const singlePWarning = "torch: GOMAXPROCS=1 makes the Go runtime hand its P to another thread during every libtorch call " +
	"over ~20 µs (+58 % on a 90 µs call on one CPU); run with GOMAXPROCS=2 or more (docs/engine.md, Scheduling)"

// Engine is the libtorch engine. Its methods are safe for concurrent use.
type Engine struct {
	initOnce     sync.Once
	initErr      error
	parallelInfo string
	sem          chan struct{}

	cudaOnce sync.Once
	cuda     cudaAPI
}

// cudaAPI returns the CUDA queries in use: libtorch's hooks plus the CUDA
// runtime found by symbol lookup, unless a test set another.
func (e *Engine) cudaAPI() cudaAPI {
	e.cudaOnce.Do(func() {
		if e.cuda == nil {
			e.cuda = &torchCUDA{}
		}
	})
	return e.cuda
}

var defaultEngine = &Engine{}

func init() {
	engine.Register(defaultEngine.Name(), defaultEngine)
}

// Default returns the engine this package registered.
func Default() *Engine { return defaultEngine }

// The thresholds the engine gives glibc malloc when the environment sets
// neither (mallocTunedByUser). With glibc's defaults (a 128 KiB mmap
// threshold that rises to the largest block freed so far, and a trim
// threshold twice that), a forward call whose intermediates are a few MiB
// hands them back to the kernel when it returns and faults every page in
// again on the next call: BERT-tiny at batch 16 took 5.8 ms instead of 2.2
// ms on the CPU. Blocks under 32 MiB (glibc's largest mmap threshold) come
// from the heap, and up to 64 MiB of free heap is kept for the next call.
const (
	mallocMmapThreshold = 32 << 20
	mallocTrimThreshold = 64 << 20
)

// mallocTunedByUser reports whether the environment sets glibc malloc's
// mmap or trim threshold itself (GLIBC_TUNABLES or the older MALLOC_*_
// variables), which the engine then leaves alone.
func mallocTunedByUser(getenv func(string) string) bool {
	if getenv("MALLOC_MMAP_THRESHOLD_") != "" || getenv("MALLOC_TRIM_THRESHOLD_") != "" {
		return true
	}
	t := getenv("GLIBC_TUNABLES")
	return strings.Contains(t, "glibc.malloc.mmap_threshold") || strings.Contains(t, "glibc.malloc.trim_threshold")
}

func envInt(name string, min int) (int, bool, error) {
	s := strings.TrimSpace(os.Getenv(name))
	if s == "" {
		return 0, false, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < min {
		return 0, false, fmt.Errorf("%s=%q: want an integer ≥ %d", name, s, min)
	}
	return n, true, nil
}

// init applies the thread settings once; a bad variable fails every use.
func (e *Engine) init() error {
	e.initOnce.Do(func() {
		threads, _, err := envInt(EnvThreads, 1)
		if err != nil {
			e.initErr = err
			return
		}
		interop, _, err := envInt(EnvInteropThreads, 1)
		if err != nil {
			e.initErr = err
			return
		}
		maxCalls, ok, err := envInt(EnvMaxCalls, 1)
		if err != nil {
			e.initErr = err
			return
		}
		fusion, _, err := envInt(EnvCPUFusion, 0)
		if err != nil || fusion > 1 {
			e.initErr = fmt.Errorf("%s=%q: want 0 or 1", EnvCPUFusion, os.Getenv(EnvCPUFusion))
			return
		}
		if !ok {
			maxCalls = runtime.GOMAXPROCS(0)
		}
		if runtime.GOMAXPROCS(0) == 1 {
			slog.Warn(singlePWarning)
		}
		e.sem = make(chan struct{}, maxCalls)
		res := shim.Init(threads, interop, fusion == 1, make([]byte, 4096))
		if res.Status != statusOK {
			e.initErr = newError("init", "", "", res.Status, string(res.Payload))
			return
		}
		e.parallelInfo = string(res.Payload)
		// OpenBLAS (the BLAS of Debian's libtorch) keeps its own thread
		// pool, one thread per CPU, which at::set_num_threads does not
		// reach: with the other CPUs busy, a one-thread BERT-tiny forward
		// took 0.9–1.1 ms instead of 0.3 ms.
		if threads > 0 && os.Getenv("OPENBLAS_NUM_THREADS") == "" {
			shim.BLASThreads(threads)
		}
		if !mallocTunedByUser(os.Getenv) && !shim.MallocRetain(mallocMmapThreshold, mallocTrimThreshold) {
			slog.Debug("torch: not glibc malloc; its thresholds are left alone")
		}
	})
	return e.initErr
}

// CacheDir returns the engine's cache folder (engine.CacheDirer): the
// compile cache's, from WORLDFOUNDRY_TORCH_COMPILE_CACHE_DIR ("off": none)
// or the user cache directory.
func (e *Engine) CacheDir() string { return cacheDir("", os.Getenv) }

// Name returns "libtorch".
func (e *Engine) Name() string { return "libtorch" }

// Formats lists the checkpoint formats the engine reads: TorchScript
// archives, and AOTInductor packages when it was built against libtorch
// 2.6 or later.
func (e *Engine) Formats() []spec.CheckpointFormat {
	if e.aotiUnavailable() != nil {
		return []spec.CheckpointFormat{spec.FormatTorchScript}
	}
	return []spec.CheckpointFormat{spec.FormatTorchScript, spec.FormatAOTInductor}
}

// Version returns the libtorch version the shim was built against.
func (e *Engine) Version() string { return shim.Version() }

// LibtorchVersion is a libtorch release number.
type LibtorchVersion struct{ Major, Minor, Patch int }

// String returns "MAJOR.MINOR.PATCH".
func (v LibtorchVersion) String() string { return fmt.Sprintf("%d.%d.%d", v.Major, v.Minor, v.Patch) }

// AtLeast reports whether v is release major.minor or later.
func (v LibtorchVersion) AtLeast(major, minor int) bool {
	return v.Major > major || v.Major == major && v.Minor >= minor
}

// LibtorchVersion returns the version of the libtorch the engine was
// compiled against, from torch/version.h (TORCH_VERSION_MAJOR, _MINOR,
// _PATCH): what the shim's code paths were chosen for.
func (e *Engine) LibtorchVersion() LibtorchVersion {
	major, minor, patch := shim.VersionNumbers()
	return LibtorchVersion{major, minor, patch}
}

// ParallelInfo returns libtorch's thread configuration (at::get_parallel_info),
// or the configuration error.
func (e *Engine) ParallelInfo() (string, error) {
	if err := e.init(); err != nil {
		return "", err
	}
	return e.parallelInfo, nil
}

// MaxConcurrentCalls returns how many calls may run inside libtorch at once.
func (e *Engine) MaxConcurrentCalls() int {
	if e.init() != nil {
		return 0
	}
	return cap(e.sem)
}

// Load loads a checkpoint onto opts.Device (default "cpu"), in the format
// opts.Format declares or, without one, the format recognised from the
// file (engine.ResolveFormat). A TorchScript file becomes a
// *Module: floating parameters and buffers are cast to opts.DType when set
// (integer and bool buffers keep their dtype), the module is put in eval
// mode, and the archive's structure and metadata checksums are verified
// first (libtorch trusts them). An AOTInductor package becomes an
// *AOTIModule (see loadAOTI); an engine built against libtorch older than
// 2.6 refuses one with ErrAOTIUnavailable. Load installs the process
// policy (infra.Install) first, as the seed's inference context does.
//
// Before the checkpoint, Load loads the op libraries (shared libraries of
// TorchScript custom ops) that engine.EnvOpLibraries lists, then those of
// opts.OpLibraries, each once per process (dlopen, RTLD_GLOBAL). Code
// calling a custom op that no loaded library registers fails the load
// with an error wrapping a *engine.UnknownOpError.
func (e *Engine) Load(path string, opts engine.LoadOptions) (engine.Module, error) {
	format, err := engine.ResolveFormat(path, opts.Format)
	if err != nil {
		return nil, fmt.Errorf("torch: load: %w", err)
	}
	if err := loadOpLibraries(opts.OpLibraries); err != nil {
		return nil, err
	}
	if format == spec.FormatAOTInductor {
		return e.loadAOTI(path, opts)
	}
	return e.load(path, opts)
}

func (e *Engine) load(path string, opts engine.LoadOptions) (*Module, error) {
	if err := e.init(); err != nil {
		return nil, fmt.Errorf("torch: load %s: %w", path, err)
	}
	if _, err := infra.Install(infra.Options{}); err != nil {
		return nil, fmt.Errorf("torch: load %s: process policy: %w", path, err)
	}
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("torch: load: %w", err)
	}
	if st.IsDir() {
		return nil, fmt.Errorf("torch: load %s: is a directory, want a TorchScript file", path)
	}
	if err := checkArchive(path); err != nil {
		return nil, fmt.Errorf("torch: load %s: %w", path, err)
	}
	device := opts.Device
	if device == "" {
		device = "cpu"
	}
	code := 0
	if opts.DType != "" {
		if !opts.DType.IsFloating() {
			return nil, fmt.Errorf("torch: load %s: dtype %q: want float32, float16 or bfloat16", path, opts.DType)
		}
		code, _ = dtypeCode(opts.DType)
	}
	h, res := shim.Load(path, device, code, make([]byte, 16<<10))
	if res.Status != statusOK {
		return nil, newError("load", path, "", res.Status, string(res.Payload))
	}
	info, err := decodeInfo(res.Payload)
	if err != nil {
		shim.Close(h)
		return nil, fmt.Errorf("torch: load %s: %w", path, err)
	}
	return newModule(e, h, info, path, opts.DType, st), nil
}

// EmptyCache returns unreferenced cached CUDA memory to the device
// (c10::cuda::CUDACachingAllocator::emptyCache); a no-op without CUDA.
func (e *Engine) EmptyCache() error {
	c := e.cudaAPI()
	if c.deviceCount() == 0 {
		return nil
	}
	return c.emptyCache()
}

// Synchronize waits for the work queued on device: "" or "cuda" is the
// current CUDA device, "cuda:N" device N; a no-op for "cpu", other devices,
// and "" without CUDA.
func (e *Engine) Synchronize(device string) error {
	c := e.cudaAPI()
	d := strings.TrimSpace(device)
	switch {
	case d == "" && c.deviceCount() == 0:
		return nil
	case d == "" || d == "cuda":
		i, err := c.currentDevice()
		if err != nil {
			return err
		}
		return c.synchronize(i)
	case strings.HasPrefix(d, "cuda:"):
		i, err := strconv.Atoi(d[len("cuda:"):])
		if err != nil || i < 0 {
			return fmt.Errorf("torch: synchronize: bad device %q", device)
		}
		if n := c.deviceCount(); i >= n {
			return fmt.Errorf("torch: synchronize %s: %d CUDA devices visible", device, n)
		}
		return c.synchronize(i)
	}
	return nil
}

// CUDADeviceCount returns the number of CUDA devices libtorch sees (0 on a
// CPU build of libtorch).
func (e *Engine) CUDADeviceCount() int { return e.cudaAPI().deviceCount() }

// CUDACurrentDevice returns the process's current CUDA device index (the one
// a launcher chose with set_device, e.g. LOCAL_RANK under torchrun).
func (e *Engine) CUDACurrentDevice() (int, error) { return e.cudaAPI().currentDevice() }

// CUDADevice returns name, compute capability and free/total memory of one
// CUDA device.
func (e *Engine) CUDADevice(index int) (engine.DeviceInfo, error) {
	c := e.cudaAPI()
	if n := c.deviceCount(); index < 0 || index >= n {
		if n == 0 {
			return engine.DeviceInfo{}, errNoCUDA
		}
		return engine.DeviceInfo{}, fmt.Errorf("torch: CUDA device %d: %d devices visible", index, n)
	}
	return c.device(index)
}

// GlobalFlags reads libtorch's global flags (infra.FlagEngine).
func (e *Engine) GlobalFlags() (infra.Flags, error) {
	f := shim.GetFlags()
	precision := [...]string{infra.PrecisionHighest, infra.PrecisionHigh, infra.PrecisionMedium}
	if f.MatmulPrecision < 0 || f.MatmulPrecision >= len(precision) {
		return infra.Flags{}, fmt.Errorf("torch: unknown matmul precision code %d", f.MatmulPrecision)
	}
	return infra.Flags{
		MatmulPrecision:       precision[f.MatmulPrecision],
		AllowTF32CuBLAS:       f.AllowTF32CuBLAS,
		AllowTF32CuDNN:        f.AllowTF32CuDNN,
		FlashSDP:              f.FlashSDP,
		MathSDP:               f.MathSDP,
		Deterministic:         f.Deterministic,
		DeterministicWarnOnly: f.DeterministicWarnOnly,
		DeterministicCuDNN:    f.DeterministicCuDNN,
		BenchmarkCuDNN:        f.BenchmarkCuDNN,
	}, nil
}

// SetGlobalFlags writes libtorch's global flags through at::globalContext()
// (infra.FlagEngine). AllowTF32CuBLAS is read only.
func (e *Engine) SetGlobalFlags(f infra.Flags) error {
	var p int
	switch f.MatmulPrecision {
	case infra.PrecisionHighest:
		p = 0
	case infra.PrecisionHigh:
		p = 1
	case infra.PrecisionMedium:
		p = 2
	default:
		return fmt.Errorf("torch: matmul precision %q: want highest, high or medium", f.MatmulPrecision)
	}
	res := shim.SetFlags(shim.Flags{
		MatmulPrecision:       p,
		AllowTF32CuDNN:        f.AllowTF32CuDNN,
		FlashSDP:              f.FlashSDP,
		MathSDP:               f.MathSDP,
		Deterministic:         f.Deterministic,
		DeterministicWarnOnly: f.DeterministicWarnOnly,
		DeterministicCuDNN:    f.DeterministicCuDNN,
		BenchmarkCuDNN:        f.BenchmarkCuDNN,
	}, make([]byte, 1024))
	if res.Status != statusOK {
		return newError("set flags", "", "", res.Status, string(res.Payload))
	}
	return nil
}

var errNoCUDA = errors.New("torch: CUDA is not available (libtorch is a CPU build or no device is visible)")

// The compile levels must match the shim's.
var _ = [1]struct{}{}[levelFreeze-shim.Freeze]
var _ = [1]struct{}{}[levelFreezeOptimize-shim.FreezeOptimize]

// The engine and its modules implement the runtime's and infra's interfaces.
var (
	_ engine.Engine        = (*Engine)(nil)
	_ engine.CUDAEngine    = (*Engine)(nil)
	_ engine.CacheReleaser = (*Engine)(nil)
	_ engine.Synchronizer  = (*Engine)(nil)
	_ engine.CacheDirer    = (*Engine)(nil)
	_ engine.Compiler      = (*Engine)(nil)
	_ engine.Module        = (*Module)(nil)
	_ infra.FlagEngine     = (*Engine)(nil)
)
