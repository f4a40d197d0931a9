// Package device resolves where and in which precision inference runs: the
// device string (without silently choosing the wrong GPU), the process's
// current accelerator under torchrun, the inference dtype from the device's
// capability, the autocast decision for a call, and a batch size from free
// memory with environment overrides.
//
// Every function takes the engine.Engine to ask about CUDA devices; a nil
// engine means a CPU-only process (no engine linked). The package is pure Go.
package device

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/worldfoundry/wfgen/runtime/engine"
)

// Device types with a meaning in this package.
const (
	CPU  = "cpu"
	CUDA = "cuda"
)

// EnvLocalRank is the variable torchrun sets to the process's rank on its
// node; it selects the process's CUDA device.
const EnvLocalRank = "LOCAL_RANK"

// otherTypes are PyTorch device types that are valid names but that no wfgen
// engine runs on (libtorch 1.13 CPU/CUDA builds).
var otherTypes = []string{"mps", "xpu", "npu", "hip", "xla", "hpu", "ipu", "meta", "vulkan", "lazy", "ort"}

// Device is a parsed device string.
type Device struct {
	// Type is the device type, lower-case: "cpu", "cuda", or another PyTorch
	// device type such as "mps".
	Type string
	// Index is the device index, or -1 when the string gave none.
	Index int
}

// String returns the canonical form: "cpu", "cuda", "cuda:1".
func (d Device) String() string {
	if d.Index < 0 || d.Type == CPU {
		return d.Type
	}
	return d.Type + ":" + strconv.Itoa(d.Index)
}

// IsCUDA reports whether d is a CUDA device.
func (d Device) IsCUDA() bool { return d.Type == CUDA }

// Parse parses a device string: "cpu", "cuda", "cuda:N" or another PyTorch
// device type with an optional index ("mps", "xpu:1"). Case and surrounding
// spaces are ignored. Anything else is an error saying what is accepted.
func Parse(s string) (Device, error) {
	in := s
	s = strings.ToLower(strings.TrimSpace(s))
	typ, idx, hasIdx := strings.Cut(s, ":")
	if typ != CPU && typ != CUDA && !slices.Contains(otherTypes, typ) {
		return Device{}, fmt.Errorf("device %q is not a device: want \"cpu\", \"cuda\" or \"cuda:N\"", in)
	}
	d := Device{Type: typ, Index: -1}
	if hasIdx {
		n, err := strconv.Atoi(idx)
		if err != nil || n < 0 || idx == "" || idx[0] == '+' {
			return Device{}, fmt.Errorf("device %q: index %q is not a non-negative integer", in, idx)
		}
		d.Index = n
	}
	return d, nil
}

// Resolve turns a requested device into a concrete one without silently
// choosing the wrong GPU (the seed's resolve_inference_device):
//
//   - "" means "cuda".
//   - "cpu" (or "cpu:N") is "cpu".
//   - Bare "cuda" is this process's current CUDA device (see CurrentCUDAIndex),
//     so ranks under torchrun do not all collapse onto cuda:0.
//   - "cuda:N" is kept as asked and must be a visible device; an index out of
//     range is always an error, even with allowCPUFallback (it is a
//     configuration mistake, not a missing accelerator).
//   - When no CUDA device is available (no engine, a CPU build, or zero
//     visible devices), "cuda"/"cuda:N" become "cpu" if allowCPUFallback, and
//     are an error naming what was asked and what exists otherwise.
//   - Other PyTorch device types ("mps", "xpu", "npu", ...) are valid names no
//     wfgen engine runs on: "cpu" with allowCPUFallback, an error otherwise.
//   - Unknown names are an error even with allowCPUFallback.
func Resolve(eng engine.Engine, requested string, allowCPUFallback bool) (string, error) {
	if strings.TrimSpace(requested) == "" {
		requested = CUDA
	}
	d, err := Parse(requested)
	if err != nil {
		return "", err
	}
	switch d.Type {
	case CPU:
		return CPU, nil
	case CUDA:
		n := cudaCount(eng)
		if n == 0 {
			if allowCPUFallback {
				return CPU, nil
			}
			return "", fmt.Errorf("device %q requested but no CUDA device is available (%s); use \"cpu\" or allow CPU fallback",
				requested, describeCUDA(eng))
		}
		if d.Index < 0 {
			idx, err := CurrentCUDAIndex(eng)
			if err != nil {
				return "", fmt.Errorf("device %q: %w", requested, err)
			}
			return Device{Type: CUDA, Index: idx}.String(), nil
		}
		if d.Index >= n {
			return "", fmt.Errorf("device %q requested but only %s visible (%s)%s",
				requested, plural(n, "CUDA device is", "CUDA devices are"), indexList(n), visibleNote())
		}
		return d.String(), nil
	default:
		if allowCPUFallback {
			return CPU, nil
		}
		engName := "no engine is linked"
		if eng != nil {
			engName = fmt.Sprintf("the %s %s engine runs on cpu and cuda only", eng.Name(), eng.Version())
		}
		return "", fmt.Errorf("device %q is not supported (%s); use \"cpu\" or \"cuda\", or allow CPU fallback", requested, engName)
	}
}

// CurrentCUDAIndex returns the CUDA device this process should use when it
// asks for bare "cuda":
//
//   - With LOCAL_RANK set (torchrun and most launchers), the device with that
//     index. When the launcher made exactly one device visible to each rank
//     (CUDA_VISIBLE_DEVICES per process), a rank beyond it maps to cuda:0; with
//     several visible devices, a rank beyond them is an error.
//   - Otherwise the engine's current device (CUDACurrentDevice).
//
// LOCAL_RANK wins over the engine's current device because nothing in a Go
// process calls set_device the way a Python worker does.
func CurrentCUDAIndex(eng engine.Engine) (int, error) {
	n := cudaCount(eng)
	if n == 0 {
		return 0, fmt.Errorf("no CUDA device is available (%s)", describeCUDA(eng))
	}
	if v, ok := os.LookupEnv(EnvLocalRank); ok && strings.TrimSpace(v) != "" {
		r, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil || r < 0 {
			return 0, fmt.Errorf("%s=%q is not a non-negative integer", EnvLocalRank, v)
		}
		switch {
		case r < n:
			return r, nil
		case n == 1:
			return 0, nil
		default:
			return 0, fmt.Errorf("%s=%d but only %s visible (%s)%s",
				EnvLocalRank, r, plural(n, "CUDA device is", "CUDA devices are"), indexList(n), visibleNote())
		}
	}
	c, err := engine.AsCUDA(eng)
	if err != nil {
		return 0, fmt.Errorf("current CUDA device: %w", err)
	}
	idx, err := c.CUDACurrentDevice()
	if err != nil {
		return 0, fmt.Errorf("current CUDA device: %w", err)
	}
	if idx < 0 || idx >= n {
		return 0, fmt.Errorf("engine reports current CUDA device %d but %s visible", idx, plural(n, "CUDA device is", "CUDA devices are"))
	}
	return idx, nil
}

// CurrentAccelerator returns the accelerator selected for this process —
// "cuda:N" from CurrentCUDAIndex — or "cpu" when no CUDA device is available.
func CurrentAccelerator(eng engine.Engine) (string, error) {
	if cudaCount(eng) == 0 {
		return CPU, nil
	}
	idx, err := CurrentCUDAIndex(eng)
	if err != nil {
		return "", err
	}
	return Device{Type: CUDA, Index: idx}.String(), nil
}

// cudaIndex resolves a CUDA device (bare or indexed) to an index that exists.
func cudaIndex(eng engine.Engine, d Device) (int, error) {
	n := cudaCount(eng)
	if n == 0 {
		return 0, fmt.Errorf("device %s: no CUDA device is available (%s)", d, describeCUDA(eng))
	}
	if d.Index < 0 {
		return CurrentCUDAIndex(eng)
	}
	if d.Index >= n {
		return 0, fmt.Errorf("device %s: only %s visible (%s)", d, plural(n, "CUDA device is", "CUDA devices are"), indexList(n))
	}
	return d.Index, nil
}

func cudaCount(eng engine.Engine) int {
	if eng == nil {
		return 0
	}
	return max(0, engine.CUDADevices(eng))
}

// cudaDevice returns the capability and memory of CUDA device idx.
func cudaDevice(eng engine.Engine, idx int) (engine.DeviceInfo, error) {
	c, err := engine.AsCUDA(eng)
	if err != nil {
		return engine.DeviceInfo{}, err
	}
	return c.CUDADevice(idx)
}

func describeCUDA(eng engine.Engine) string {
	if eng == nil {
		return "no engine is linked: import _ \"github.com/worldfoundry/wfgen/runtime/torch\""
	}
	return fmt.Sprintf("engine %s %s reports 0 CUDA devices%s", eng.Name(), eng.Version(), visibleNote())
}

// visibleNote names CUDA_VISIBLE_DEVICES when it is set, since it is the
// usual reason a device is missing.
func visibleNote() string {
	if v, ok := os.LookupEnv("CUDA_VISIBLE_DEVICES"); ok {
		return fmt.Sprintf("; CUDA_VISIBLE_DEVICES=%q", v)
	}
	return ""
}

func indexList(n int) string {
	if n == 1 {
		return "cuda:0"
	}
	return fmt.Sprintf("cuda:0 to cuda:%d", n-1)
}

func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return strconv.Itoa(n) + " " + many
}
