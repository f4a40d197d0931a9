//go:build cgo

package client_test

import (
	"context"
	"testing"

	"github.com/worldfoundry/wfgen/runtime/client"
	"github.com/worldfoundry/wfgen/runtime/torch"

	"github.com/worldfoundry/wfgen/runtime/engine"
	wfspec "github.com/worldfoundry/wfgen/runtime/spec"
	"github.com/worldfoundry/wfgen/runtime/tensor"
)

// A variant's compile block (or WORLDFOUNDRY_TORCH_COMPILE) compiles the
// module when it loads — one compiled module per checkpoint, device, dtype
// and setting, shared by the clients — and compiling changes no result.
func TestCompiledVariant(t *testing.T) {
	t.Setenv(torch.EnvCompileCacheDir, t.TempDir())
	dir := tiny.Dir(t)
	tokens := tensor.FromInt64([]int64{3, 1, 4, 1, 5, 9}, 6)
	run := func(spec *wfspec.ModelInferenceSpec) (engine.Module, []float32) {
		t.Helper()
		c, err := client.New(spec, client.WithCheckpointRoot(dir), client.WithDevice("cpu"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		out, err := c.Run(context.Background(), "embed", map[string]any{"tokens": tokens, "normalize": true}, nil)
		if err != nil {
			t.Fatal(err)
		}
		v, err := out["embedding"].(*tensor.Tensor).Float32s()
		if err != nil {
			t.Fatal(err)
		}
		m, err := c.Module()
		if err != nil {
			t.Fatal(err)
		}
		return m, v
	}
	plainMod, plain := run(loadSpec(t, "tiny-encoder"))
	if plainMod.(*torch.Module).Compiled() {
		t.Fatal("a variant without a compile block was compiled")
	}

	on := true
	spec := loadSpec(t, "tiny-encoder")
	spec.Variants[0].Compile = &wfspec.CompileSpec{Enabled: &on, Strict: &on}
	compiledMod, compiled := run(spec)
	if !compiledMod.(*torch.Module).Compiled() {
		t.Fatal("compile: {enabled: true} did not compile the module")
	}
	for i := range plain {
		if d := plain[i] - compiled[i]; d > 1e-5 || d < -1e-5 {
			t.Fatalf("compiled output [%d] = %v, uncompiled %v", i, compiled[i], plain[i])
		}
	}
	// A second client of the same setting shares the compiled module.
	if again, _ := run(spec); again != compiledMod {
		t.Error("a second client with the same compile setting got another module")
	}

	// The variable turns it on when the manifest says nothing.
	t.Setenv(torch.EnvCompile, "1")
	if envMod, _ := run(loadSpec(t, "tiny-encoder")); !envMod.(*torch.Module).Compiled() {
		t.Error("WORLDFOUNDRY_TORCH_COMPILE=1 did not compile the module")
	}
	// And an explicit enabled: false wins over it.
	off := false
	spec = loadSpec(t, "tiny-encoder")
	spec.Variants[0].Compile = &wfspec.CompileSpec{Enabled: &off}
	if offMod, _ := run(spec); offMod.(*torch.Module).Compiled() {
		t.Error("compile: {enabled: false} compiled the module")
	}
}

// A per-call output buffer reaches the engine: once it has the size of the
// output, two calls given the same buffer return their tensors in the same
// memory; two calls without one do not.
func TestRunWithOutputBuffer(t *testing.T) {
	t.Parallel()
	dir := tiny.Dir(t)
	c, err := client.New(loadSpec(t, "tiny-world"), client.WithCheckpointRoot(dir), client.WithDevice("cpu"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	call := map[string]any{"prompt": "a red fox", "num_frames": int64(5)}
	data := func(opts ...client.CallOption) *byte {
		t.Helper()
		out, err := c.Run(context.Background(), "generate", call, nil, opts...)
		if err != nil {
			t.Fatal(err)
		}
		return &out["video"].(*tensor.Tensor).Data[0]
	}
	var buf tensor.OutputBuffer
	data(client.WithOutputBuffer(&buf)) // sizes the buffer (the first output may not fit)
	if a, b := data(client.WithOutputBuffer(&buf)), data(client.WithOutputBuffer(&buf)); a != b {
		t.Error("two calls given one output buffer returned their tensors in different memory")
	}
	if a, b := data(), data(); a == b {
		t.Error("two calls without a buffer shared memory")
	}
}
