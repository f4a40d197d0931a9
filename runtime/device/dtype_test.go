package device

import (
	"reflect"
	"strings"
	"testing"

	"github.com/worldfoundry/wfgen/internal/enginetest"
	"github.com/worldfoundry/wfgen/runtime/engine"
	"github.com/worldfoundry/wfgen/runtime/tensor"
)

func TestParseDType(t *testing.T) {
	good := map[string]tensor.DType{
		"": Auto, "auto": Auto, "AUTO": Auto,
		"fp32": tensor.Float32, "float32": tensor.Float32, "float": tensor.Float32, "torch.float32": tensor.Float32,
		"fp16": tensor.Float16, "half": tensor.Float16, " Float16 ": tensor.Float16, "torch.half": tensor.Float16,
		"bf16": tensor.BFloat16, "bfloat16": tensor.BFloat16, "torch.bfloat16": tensor.BFloat16,
	}
	for in, want := range good {
		if got, err := ParseDType(in); err != nil || got != want {
			t.Errorf("ParseDType(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"int64", "double", "fp8", "bf32", "float64"} {
		if _, err := ParseDType(in); err == nil || !strings.Contains(err.Error(), "want auto, float32") {
			t.Errorf("ParseDType(%q) err = %v", in, err)
		}
	}
}

func TestResolveDType(t *testing.T) {
	t.Setenv(EnvLocalRank, "")
	ampere := &enginetest.Engine{GPUs: []engine.DeviceInfo{enginetest.GPU(0, 8, 6, 22)}}
	hopper := &enginetest.Engine{GPUs: []engine.DeviceInfo{enginetest.GPU(0, 9, 0, 79)}}
	turing := &enginetest.Engine{GPUs: []engine.DeviceInfo{enginetest.GPU(0, 7, 5, 15)}}
	mixed := &enginetest.Engine{GPUs: []engine.DeviceInfo{enginetest.GPU(0, 7, 0, 15), enginetest.GPU(1, 8, 0, 40)}, Current: 1}
	cases := []struct {
		name   string
		eng    engine.Engine
		device string
		dtype  string
		strict bool
		want   tensor.DType
		err    string
	}{
		{"auto ampere", ampere, "cuda:0", "auto", true, tensor.BFloat16, ""},
		{"auto hopper", hopper, "cuda:0", "", true, tensor.BFloat16, ""},
		{"auto turing", turing, "cuda:0", "auto", true, tensor.Float16, ""},
		{"auto cpu", nil, "cpu", "auto", true, tensor.Float32, ""},
		{"auto cpu with gpus", hopper, "cpu", "auto", true, tensor.Float32, ""},
		{"auto mps", nil, "mps", "auto", true, tensor.Float32, ""},
		{"explicit fp16 on ampere", ampere, "cuda:0", "half", true, tensor.Float16, ""},
		{"explicit fp32 on cuda", turing, "cuda:0", "fp32", true, tensor.Float32, ""},
		{"bf16 strict on turing", turing, "cuda:0", "bf16", true, "", "dtype bfloat16 is not supported on cuda:0 (GPU0 sm_75, compute capability 7.5; bfloat16 needs 8.0 or newer)"},
		{"bf16 non-strict on turing", turing, "cuda:0", "bf16", false, tensor.BFloat16, ""},
		{"bf16 cpu", nil, "cpu", "bf16", true, tensor.BFloat16, ""},
		{"fp16 cpu strict", nil, "cpu", "fp16", true, "", "dtype float16 on cpu"},
		{"fp16 cpu non-strict", nil, "cpu", "fp16", false, tensor.Float16, ""},
		{"bare cuda uses current device", mixed, "cuda", "auto", true, tensor.BFloat16, ""},
		{"explicit older device of mixed", mixed, "cuda:0", "auto", true, tensor.Float16, ""},
		{"cuda without engine", nil, "cuda:0", "auto", true, "", "no CUDA device is available"},
		{"cuda index out of range", ampere, "cuda:3", "auto", true, "", "only 1 CUDA device is visible"},
		{"bad dtype", ampere, "cuda:0", "int8", true, "", `dtype "int8" is not an inference dtype`},
		{"bad device", ampere, "gpu0", "auto", true, "", `"gpu0" is not a device`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ResolveDType(tc.eng, tc.device, tc.dtype, tc.strict)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("= %q, %v; want error %q", got, err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("= %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

func TestAutocast(t *testing.T) {
	t.Setenv(EnvLocalRank, "")
	ampere := &enginetest.Engine{GPUs: []engine.DeviceInfo{enginetest.GPU(0, 8, 0, 40)}}
	volta := &enginetest.Engine{GPUs: []engine.DeviceInfo{enginetest.GPU(0, 7, 0, 15)}}
	on := func(d tensor.DType) engine.CallOptions {
		return engine.CallOptions{Autocast: true, AutocastDType: d}
	}
	cases := []struct {
		name    string
		eng     engine.Engine
		device  string
		dtype   string
		enabled bool
		want    engine.CallOptions
		err     string
	}{
		{"cuda auto ampere", ampere, "cuda:0", "auto", true, on(tensor.BFloat16), ""},
		{"cuda auto volta", volta, "cuda", "", true, on(tensor.Float16), ""},
		{"cuda fp16", ampere, "cuda:0", "fp16", true, on(tensor.Float16), ""},
		{"cuda fp32 is off", ampere, "cuda:0", "float32", true, engine.CallOptions{}, ""},
		{"disabled", ampere, "cuda:0", "bf16", false, engine.CallOptions{}, ""},
		{"cpu is a no-op", ampere, "cpu", "bf16", true, engine.CallOptions{}, ""},
		{"cpu without engine", nil, "cpu", "auto", true, engine.CallOptions{}, ""},
		{"mps is a no-op", nil, "mps", "fp16", true, engine.CallOptions{}, ""},
		{"bf16 on volta", volta, "cuda:0", "bf16", true, engine.CallOptions{}, "autocast: dtype bfloat16 is not supported"},
		{"bad dtype on cpu", nil, "cpu", "int8", true, engine.CallOptions{}, "not an inference dtype"},
		// The seed's missing-torch path: a no-op context, not an error.
		{"cuda without engine is a no-op", nil, "cuda:0", "bf16", true, engine.CallOptions{}, ""},
		{"bare cuda without engine is a no-op", nil, "cuda", "auto", true, engine.CallOptions{}, ""},
		{"cuda with no CUDA device is a no-op", &enginetest.Engine{}, "cuda:1", "fp16", true, engine.CallOptions{}, ""},
		{"bad dtype on cuda without engine", nil, "cuda", "int8", true, engine.CallOptions{}, "not an inference dtype"},
		{"bad device", nil, "tpu", "auto", true, engine.CallOptions{}, "is not a device"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Autocast(tc.eng, tc.device, tc.dtype, tc.enabled)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("= %+v, %v; want error %q", got, err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("= %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
}

// TestAutocastTakesStrings pins the autocast row of docs/differences.md:
// the seed's autocast_context takes a tensor, a torch.device or a string
// as the device and a torch.dtype as the dtype; Autocast takes the device
// and the dtype as strings only — a dtype as Python prints it
// ("torch.bfloat16") included — and dtype "" means auto.
func TestAutocastTakesStrings(t *testing.T) {
	ft := reflect.TypeOf(Autocast)
	str := reflect.TypeFor[string]()
	if ft.NumIn() != 4 || ft.In(1) != str || ft.In(2) != str {
		t.Fatalf("Autocast is %v; the row says the device and dtype are strings", ft)
	}
	ampere := &enginetest.Engine{GPUs: []engine.DeviceInfo{enginetest.GPU(0, 8, 0, 40)}}
	for _, dt := range []string{"torch.bfloat16", "bf16", "", "auto"} {
		got, err := Autocast(ampere, "cuda:0", dt, true)
		if err != nil || got != (engine.CallOptions{Autocast: true, AutocastDType: tensor.BFloat16}) {
			t.Errorf("Autocast(cuda:0, %q) = %+v, %v; want bfloat16 autocast", dt, got, err)
		}
	}
	if got, err := Autocast(ampere, "cuda:0", "torch.float16", true); err != nil || got.AutocastDType != tensor.Float16 {
		t.Errorf("Autocast(cuda:0, torch.float16) = %+v, %v", got, err)
	}
}
