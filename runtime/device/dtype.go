package device

import (
	"fmt"
	"strings"

	"github.com/worldfoundry/wfgen/runtime/engine"
	"github.com/worldfoundry/wfgen/runtime/tensor"
)

// Auto asks ResolveDType to choose the dtype from the device.
const Auto tensor.DType = "auto"

// dtypeNames maps every accepted spelling to its dtype.
var dtypeNames = map[string]tensor.DType{
	"": Auto, "auto": Auto,
	"float32": tensor.Float32, "fp32": tensor.Float32, "float": tensor.Float32, "f32": tensor.Float32,
	"single": tensor.Float32, "torch.float32": tensor.Float32, "torch.float": tensor.Float32,
	"float16": tensor.Float16, "fp16": tensor.Float16, "half": tensor.Float16, "f16": tensor.Float16,
	"torch.float16": tensor.Float16, "torch.half": tensor.Float16,
	"bfloat16": tensor.BFloat16, "bf16": tensor.BFloat16, "torch.bfloat16": tensor.BFloat16,
}

// ParseDType parses an inference dtype name, ignoring case and spaces:
// "auto" (or ""), "float32" (fp32, float, f32, single, torch.float32,
// torch.float), "float16" (fp16, half, f16, torch.float16, torch.half) or
// "bfloat16" (bf16, torch.bfloat16). Other names, integer types included,
// are an error listing the accepted ones.
func ParseDType(s string) (tensor.DType, error) {
	if d, ok := dtypeNames[strings.ToLower(strings.TrimSpace(s))]; ok {
		return d, nil
	}
	return "", fmt.Errorf("dtype %q is not an inference dtype: want auto, float32 (fp32, float), float16 (fp16, half) or bfloat16 (bf16)", s)
}

// ResolveDType resolves an inference dtype for a device (the seed's
// resolve_inference_dtype):
//
//   - "auto" is bfloat16 on CUDA devices with compute capability 8.0 or newer
//     (Ampere, Hopper, Blackwell), float16 on older CUDA devices, and float32
//     on the CPU and every other device.
//   - An explicit dtype is kept, except in strict mode: bfloat16 on a CUDA
//     device older than 8.0 is an error (instead of a later kernel failure),
//     and so is float16 on the CPU, whose libtorch 1.13 kernels lack
//     half-precision matmul and convolution ("addmm_impl_cpu_" not implemented
//     for 'Half'). Without strict the dtype is returned as asked.
//
// device may be bare "cuda" (resolved like Resolve does); a CUDA device needs
// an engine to read its capability.
func ResolveDType(eng engine.Engine, device, dtype string, strict bool) (tensor.DType, error) {
	want, err := ParseDType(dtype)
	if err != nil {
		return "", err
	}
	d, err := Parse(device)
	if err != nil {
		return "", err
	}
	if !d.IsCUDA() {
		switch {
		case want == Auto:
			return tensor.Float32, nil
		case strict && want == tensor.Float16 && d.Type == CPU:
			return "", fmt.Errorf("dtype float16 on cpu: libtorch's CPU kernels lack half-precision matmul and convolution; " +
				"use float32 or bfloat16, or resolve without strict mode")
		}
		return want, nil
	}
	idx, err := cudaIndex(eng, d)
	if err != nil {
		return "", err
	}
	info, err := cudaDevice(eng, idx)
	if err != nil {
		return "", fmt.Errorf("cuda:%d: %w", idx, err)
	}
	bf16 := info.Major >= 8
	switch {
	case want == Auto && bf16:
		return tensor.BFloat16, nil
	case want == Auto:
		return tensor.Float16, nil
	case strict && want == tensor.BFloat16 && !bf16:
		return "", fmt.Errorf("dtype bfloat16 is not supported on cuda:%d (%s, compute capability %d.%d; bfloat16 needs 8.0 or newer): "+
			"use float16 or auto, or resolve without strict mode", idx, info.Name, info.Major, info.Minor)
	}
	return want, nil
}

// Autocast returns the call options that enable CUDA autocast for one call
// (the seed's autocast_context): autocast is on only when enabled is true,
// the device is a CUDA device and the dtype is float16 or bfloat16. dtype
// "auto" (or "") is resolved with ResolveDType; an explicit bfloat16 on a
// device older than compute capability 8.0 is an error. float32 means full
// precision, so autocast stays off. On the CPU and every other device, and
// on a CUDA device when no engine is linked (the seed's missing-torch path)
// or the engine sees no CUDA device (where torch disables CUDA autocast with
// a warning), the result is the zero CallOptions: a no-op. A malformed
// device or dtype string is an error on every path.
func Autocast(eng engine.Engine, device, dtype string, enabled bool) (engine.CallOptions, error) {
	if !enabled {
		return engine.CallOptions{}, nil
	}
	d, err := Parse(device)
	if err != nil {
		return engine.CallOptions{}, err
	}
	if !d.IsCUDA() || cudaCount(eng) == 0 {
		if _, err := ParseDType(dtype); err != nil {
			return engine.CallOptions{}, err
		}
		return engine.CallOptions{}, nil
	}
	dt, err := ResolveDType(eng, device, dtype, true)
	if err != nil {
		return engine.CallOptions{}, fmt.Errorf("autocast: %w", err)
	}
	if dt == tensor.Float32 {
		return engine.CallOptions{}, nil
	}
	return engine.CallOptions{Autocast: true, AutocastDType: dt}, nil
}
