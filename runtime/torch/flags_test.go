//go:build cgo

package torch

import (
	"testing"

	"github.com/worldfoundry/wfgen/runtime/infra"
)

// restoreFlags puts libtorch's global flags back after the test.
func restoreFlags(t *testing.T) infra.Flags {
	t.Helper()
	before, err := Default().GlobalFlags()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := Default().SetGlobalFlags(before); err != nil {
			t.Errorf("restoring flags: %v", err)
		}
	})
	return before
}

func TestGlobalFlagsRoundTrip(t *testing.T) {
	restoreFlags(t)
	e := Default()
	want := infra.Flags{MatmulPrecision: infra.PrecisionMedium, AllowTF32CuBLAS: true, AllowTF32CuDNN: false,
		FlashSDP: false, MathSDP: true, Deterministic: true, DeterministicWarnOnly: true, DeterministicCuDNN: true,
		BenchmarkCuDNN: true}
	if err := e.SetGlobalFlags(want); err != nil {
		t.Fatal(err)
	}
	got, err := e.GlobalFlags()
	if err != nil || got != want {
		t.Fatalf("GlobalFlags() = %+v, %v; want %+v", got, err, want)
	}
	want = infra.Flags{MatmulPrecision: infra.PrecisionHighest, AllowTF32CuDNN: true, FlashSDP: true}
	if err := e.SetGlobalFlags(want); err != nil {
		t.Fatal(err)
	}
	// AllowTF32CuBLAS follows the precision on libtorch 1.13.
	if got, _ := e.GlobalFlags(); got != want {
		t.Fatalf("GlobalFlags() = %+v; want %+v", got, want)
	}
	if err := e.SetGlobalFlags(infra.Flags{MatmulPrecision: "low"}); err == nil {
		t.Error("unknown precision accepted")
	}
}

// The process policy applies through at::globalContext() and uninstall
// restores what it found.
func TestPolicyAppliesThroughLibtorch(t *testing.T) {
	restoreFlags(t)
	e := Default()
	start := infra.Flags{MatmulPrecision: infra.PrecisionHighest, FlashSDP: true, MathSDP: true}
	if err := e.SetGlobalFlags(start); err != nil {
		t.Fatal(err)
	}
	vars := map[string]string{
		infra.EnvAttentionBackend: "math", infra.EnvMatmulPrecision: "medium", infra.EnvDeterministic: "1",
	}
	p := infra.NewPolicy(e, func(k string) string { return vars[k] })
	st, err := p.Install(infra.Options{})
	if err != nil {
		t.Fatal(err)
	}
	got, _ := e.GlobalFlags()
	want := infra.Flags{MatmulPrecision: infra.PrecisionMedium, AllowTF32CuBLAS: true, AllowTF32CuDNN: true,
		MathSDP: true, Deterministic: true, DeterministicCuDNN: true}
	if got != want || !st.Applied || st.Flags != want || st.MatmulPrecision != "medium" || !st.Deterministic {
		t.Errorf("after install: flags %+v, state %+v; want flags %+v", got, st, want)
	}
	if _, err := p.Uninstall(); err != nil {
		t.Fatal(err)
	}
	if got, _ := e.GlobalFlags(); got != start {
		t.Errorf("after uninstall: %+v, want %+v", got, start)
	}
}
