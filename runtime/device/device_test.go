package device

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/worldfoundry/wfgen/internal/enginetest"
	"github.com/worldfoundry/wfgen/runtime/engine"
)

// eightGPUs is an eight-GPU workspace whose current device is 2.
func eightGPUs() *enginetest.Engine {
	f := &enginetest.Engine{Current: 2}
	for i := range 8 {
		f.GPUs = append(f.GPUs, enginetest.GPU(i, 8, 0, 79))
	}
	return f
}

func TestParse(t *testing.T) {
	good := map[string]Device{
		"cpu": {CPU, -1}, " CPU ": {CPU, -1}, "cpu:0": {CPU, 0}, "cuda": {CUDA, -1}, "cuda:0": {CUDA, 0},
		"CUDA:12": {CUDA, 12}, "mps": {"mps", -1}, "xpu:1": {"xpu", 1},
	}
	for in, want := range good {
		got, err := Parse(in)
		if err != nil || got != want {
			t.Errorf("Parse(%q) = %+v, %v; want %+v", in, got, err, want)
		}
	}
	canon := map[string]string{"cpu:0": "cpu", "CUDA:3": "cuda:3", "cuda": "cuda", "mps:1": "mps:1"}
	for in, want := range canon {
		if d, _ := Parse(in); d.String() != want {
			t.Errorf("Parse(%q).String() = %q, want %q", in, d.String(), want)
		}
	}
	bad := map[string]string{
		"gpu":      `"gpu" is not a device`,
		"":         `"" is not a device`,
		"cuda:":    `index "" is not a non-negative integer`,
		"cuda:-1":  `index "-1"`,
		"cuda:+1":  `index "+1"`,
		"cuda:x":   `index "x"`,
		"cuda:1:2": `index "1:2"`,
		"cuda 0":   `is not a device`,
	}
	for in, want := range bad {
		if _, err := Parse(in); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Parse(%q) err = %v, want %q", in, err, want)
		}
	}
}

func TestResolve(t *testing.T) {
	t.Setenv(EnvLocalRank, "")
	t.Setenv("CUDA_VISIBLE_DEVICES", "")
	two := &enginetest.Engine{GPUs: []engine.DeviceInfo{enginetest.GPU(0, 8, 6, 20), enginetest.GPU(1, 8, 6, 20)}, Current: 1}
	cases := []struct {
		name     string
		eng      engine.Engine
		req      string
		fallback bool
		want     string
		err      string
	}{
		{"cpu", two, "cpu", false, "cpu", ""},
		{"cpu index", two, "cpu:0", false, "cpu", ""},
		{"bare cuda is current device", two, "cuda", false, "cuda:1", ""},
		{"empty is cuda", two, "", false, "cuda:1", ""},
		{"explicit index kept", eightGPUs(), "cuda:4", false, "cuda:4", ""},
		{"explicit index kept, not current", two, "cuda:0", false, "cuda:0", ""},
		{"index out of range", two, "cuda:4", false, "", `device "cuda:4" requested but only 2 CUDA devices are visible (cuda:0 to cuda:1)`},
		{"index out of range even with fallback", two, "cuda:2", true, "", "only 2 CUDA devices"},
		{"no engine, no fallback", nil, "cuda", false, "", `device "cuda" requested but no CUDA device is available (no engine is linked`},
		{"no engine, fallback", nil, "cuda", true, "cpu", ""},
		{"zero GPUs, no fallback", &enginetest.Engine{}, "cuda:0", false, "", "engine fake 0.1 reports 0 CUDA devices"},
		{"zero GPUs, fallback", &enginetest.Engine{}, "cuda:3", true, "cpu", ""},
		{"mps without fallback", two, "mps", false, "", `device "mps" is not supported (the fake 0.1 engine runs on cpu and cuda only)`},
		{"mps with fallback", two, "mps", true, "cpu", ""},
		{"npu without engine", nil, "npu:0", false, "", "no engine is linked"},
		{"typo never falls back", two, "gpu", true, "", `"gpu" is not a device`},
		{"current device error", &enginetest.Engine{GPUs: []engine.DeviceInfo{enginetest.GPU(0, 8, 0, 20)}, CurrentErr: errors.New("driver gone")}, "cuda", false, "", "driver gone"},
		{"current device out of range", &enginetest.Engine{GPUs: []engine.DeviceInfo{enginetest.GPU(0, 8, 0, 20)}, Current: 3}, "cuda", false, "", "current CUDA device 3 but 1 CUDA device is visible"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Resolve(tc.eng, tc.req, tc.fallback)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("Resolve(%q) = %q, %v; want error containing %q", tc.req, got, err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("Resolve(%q) = %q, %v; want %q", tc.req, got, err, tc.want)
			}
		})
	}
}

func TestResolveNamesCUDAVisibleDevices(t *testing.T) {
	t.Setenv("CUDA_VISIBLE_DEVICES", "6,7")
	t.Setenv(EnvLocalRank, "")
	eng := &enginetest.Engine{GPUs: []engine.DeviceInfo{enginetest.GPU(0, 9, 0, 79), enginetest.GPU(1, 9, 0, 79)}}
	_, err := Resolve(eng, "cuda:5", false)
	if err == nil || !strings.Contains(err.Error(), `CUDA_VISIBLE_DEVICES="6,7"`) {
		t.Errorf("err = %v, want CUDA_VISIBLE_DEVICES named", err)
	}
}

func TestLocalRank(t *testing.T) {
	t.Setenv("CUDA_VISIBLE_DEVICES", "")
	cases := []struct {
		rank string
		eng  engine.Engine
		want string
		err  string
	}{
		{"3", eightGPUs(), "cuda:3", ""},   // torchrun on one 8-GPU node: rank 3 → cuda:3, not the current device 2
		{"0", eightGPUs(), "cuda:0", ""},   //
		{"", eightGPUs(), "cuda:2", ""},    // unset: the engine's current device
		{" 5 ", eightGPUs(), "cuda:5", ""}, // spaces ignored
		{"3", &enginetest.Engine{GPUs: []engine.DeviceInfo{enginetest.GPU(0, 8, 0, 40)}}, "cuda:0", ""}, // one visible device per rank
		{"3", &enginetest.Engine{GPUs: []engine.DeviceInfo{enginetest.GPU(0, 8, 0, 40), enginetest.GPU(1, 8, 0, 40)}}, "", "LOCAL_RANK=3 but only 2 CUDA devices are visible"},
		{"x", eightGPUs(), "", `LOCAL_RANK="x" is not a non-negative integer`},
		{"-1", eightGPUs(), "", `LOCAL_RANK="-1"`},
		{"3", nil, "cpu", ""},                  // CPU-only process
		{"3", &enginetest.Engine{}, "cpu", ""}, // CPU build
	}
	for _, tc := range cases {
		t.Run(fmt.Sprintf("rank %q", tc.rank), func(t *testing.T) {
			t.Setenv(EnvLocalRank, tc.rank)
			got, err := CurrentAccelerator(tc.eng)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("CurrentAccelerator = %q, %v; want error %q", got, err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("CurrentAccelerator = %q, %v; want %q", got, err, tc.want)
			}
			if tc.want == "cpu" {
				return
			}
			// Bare "cuda" resolves to the same device.
			if r, err := Resolve(tc.eng, "cuda", false); err != nil || r != tc.want {
				t.Errorf("Resolve(cuda) = %q, %v; want %q", r, err, tc.want)
			}
		})
	}
}

// FuzzParse checks that Parse never panics and that what it accepts
// round-trips through String.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"cpu", "cuda", "cuda:0", "CUDA:12", "mps:1", "cuda:", "cuda:-1", "gpu", ""} {
		f.Add(s)
	}
	eng := eightGPUs()
	f.Fuzz(func(t *testing.T, s string) {
		d, err := Parse(s)
		if err != nil {
			return
		}
		again, err := Parse(d.String())
		if err != nil {
			t.Fatalf("Parse(%q) = %+v, but its String %q does not parse: %v", s, d, d.String(), err)
		}
		if d.Type != CPU && again != d {
			t.Fatalf("Parse(%q) = %+v, round trip gives %+v", s, d, again)
		}
		if r, err := Resolve(eng, s, true); err == nil {
			if _, err := Parse(r); err != nil {
				t.Fatalf("Resolve(%q) = %q, which does not parse", s, r)
			}
		}
	})
}
