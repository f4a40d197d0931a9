//go:build cgo

package goldeninputs

// Hand-written tests of the generated package (wfgen leaves files without
// its header alone, so they survive regeneration): the generated structs
// of a Dict[str, Tensor] and a Tuple[Tensor, Tensor] argument reach a real
// TorchScript module run by libtorch as the dict and the tuple, in process
// and through the wire's mapping.

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/worldfoundry/wfgen/runtime/client"
	"github.com/worldfoundry/wfgen/runtime/engine"
	"github.com/worldfoundry/wfgen/runtime/oip"
	"github.com/worldfoundry/wfgen/runtime/tensor"
	"github.com/worldfoundry/wfgen/runtime/torch"
)

// source is the module the manifest describes.
const source = `
def forward(self, features: Dict[str, Tensor], pair: Optional[Tuple[Tensor, Tensor]] = None) -> Tensor:
    h = features["a"]
    if "b" in features:
        h = h + features["b"]
    if pair is not None:
        scale, shift = pair
        h = h * scale + shift
    return h
`

func vec(n int64, f func(i int) float32) *tensor.Tensor {
	v := make([]float32, n)
	for i := range v {
		v[i] = f(i)
	}
	return tensor.FromFloat32(v, n)
}

func TestStructuredInputs(t *testing.T) {
	path := filepath.Join(t.TempDir(), "inputs.pt")
	if err := torch.BuildModule(torch.ModuleSource{Source: source}, path); err != nil {
		t.Fatal(err)
	}
	mod, err := torch.Default().Load(path, engine.LoadOptions{Device: "cpu"})
	if err != nil {
		t.Fatal(err)
	}
	defer mod.Close()
	c, err := New(client.WithCheckpointPath(path), client.WithDevice("cpu"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()

	a := tensor.FromFloat32([]float32{1, 2, 3, 4, 5, 6, 7, 8}, 2, 4)
	b := tensor.FromFloat32([]float32{0.5, 0.25, 0.125, 1, 2, 3, 4, 5}, 2, 4)
	scale, shift := vec(4, func(i int) float32 { return float32(i) - 1.5 }), vec(4, func(i int) float32 { return 0.1 * float32(i) })
	for _, c2 := range []struct {
		name   string
		p      ForwardParams
		kwargs map[string]any
	}{
		{"a", ForwardParams{Features: ForwardFeatures{A: a}}, map[string]any{"features": map[string]any{"a": a}}},
		{"a+b", ForwardParams{Features: ForwardFeatures{A: a, B: b}}, map[string]any{"features": map[string]any{"a": a, "b": b}}},
		{"a, pair", ForwardParams{Features: ForwardFeatures{A: a}, Pair: &ForwardPair{Scale: scale, Shift: shift}},
			map[string]any{"features": map[string]any{"a": a}, "pair": []any{scale, shift}}},
	} {
		want, err := mod.Call(ctx, "forward", c2.kwargs, engine.CallOptions{})
		if err != nil {
			t.Fatal(err)
		}
		r, err := c.Forward(ctx, c2.p)
		if err != nil {
			t.Fatalf("%s: %v", c2.name, err)
		}
		w := want.(*tensor.Tensor)
		if r.Y.DType != w.DType || !bytes.Equal(r.Y.Data, w.Data) {
			t.Errorf("%s: got %v, want %v", c2.name, r.Y, w)
		}
		// On the wire: features.a, features.b, pair.0, pair.1, read back
		// as the same kwargs.
		ins, err := oip.EncodeInputs(&Spec().Tasks[0], c2.p.CallKwargs(), nil)
		if err != nil {
			t.Fatal(err)
		}
		m, err := oip.NewModel(Spec())
		if err != nil {
			t.Fatal(err)
		}
		call, _, err := m.Args(&Spec().Tasks[0], ins, oip.Limits{})
		if err != nil {
			t.Fatalf("%s: %v", c2.name, err)
		}
		got, err := mod.Call(ctx, "forward", call, engine.CallOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got.(*tensor.Tensor).Data, w.Data) {
			t.Errorf("%s: through the wire mapping: %v, want %v", c2.name, got, w)
		}
	}

	// Validate names a missing key and a part breaking its contract.
	p := ForwardParams{Features: ForwardFeatures{B: b}, Pair: &ForwardPair{Scale: scale, Shift: tensor.FromFloat32([]float32{1, 2}, 2)}}
	err = p.Validate()
	if err == nil || !strings.Contains(err.Error(), `features: required key(s) "a" missing`) || !strings.Contains(err.Error(), "pair.1") {
		t.Errorf("Validate: %v", err)
	}
	if _, err := c.Forward(ctx, p); err == nil {
		t.Error("Forward ran invalid params")
	}
}
