//go:build cgo

package goldenstructured

// Hand-written tests of the generated package (wfgen leaves files without
// its header alone, so they survive regeneration): the typed results of
// tuple and list returns, from a real TorchScript module run by libtorch.

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"testing"

	"github.com/worldfoundry/wfgen/runtime/batch"
	"github.com/worldfoundry/wfgen/runtime/client"
	"github.com/worldfoundry/wfgen/runtime/engine"
	"github.com/worldfoundry/wfgen/runtime/spec"
	"github.com/worldfoundry/wfgen/runtime/stream"
	"github.com/worldfoundry/wfgen/runtime/tensor"
	"github.com/worldfoundry/wfgen/runtime/torch"
)

// source is the module the manifest describes: forward returns a tuple
// whose elements the artifacts name by position, split a tuple holding a
// list, pyramid a list.
const source = `
def forward(self, x: Tensor) -> Tuple[Tensor, Tensor]:
    h = torch.tanh(torch.matmul(x, self.w))
    return h, h.mean(dim=0)

def split(self, x: Tensor) -> Tuple[Tensor, List[Tensor]]:
    return x.sum(), [x[0:1], x[1:3] * 2.0]

def pyramid(self, x: Tensor) -> List[Tensor]:
    return [x, x[::2], x[::4]]
`

func input() *tensor.Tensor {
	v := make([]float32, 4*3)
	for i := range v {
		v[i] = float32(i)*0.25 - 1
	}
	return tensor.FromFloat32(v, 4, 3)
}

// module builds the module and returns its path and the module loaded
// directly through the engine, to compare with.
func module(t *testing.T) (string, engine.Module) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "structured.pt")
	w := tensor.FromFloat32([]float32{0.5, -0.25, 1, 0.75, 0.125, -1, 0.3, 0.2, 0.1}, 3, 3)
	if err := torch.BuildModule(torch.ModuleSource{Source: source, Parameters: map[string]*tensor.Tensor{"w": w}}, path); err != nil {
		t.Fatal(err)
	}
	m, err := torch.Default().Load(path, engine.LoadOptions{Device: "cpu"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return path, m
}

func same(t *testing.T, what string, got *tensor.Tensor, want any) {
	t.Helper()
	w, ok := want.(*tensor.Tensor)
	if got == nil || !ok || got.DType != w.DType || !equalShape(got.Shape, w.Shape) || !bytes.Equal(got.Data, w.Data) {
		t.Errorf("%s: got %v, want %v", what, got, want)
	}
}

func equalShape(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// The typed results hold, bit for bit, what the module returned: tuple
// elements by position and in order, lists as slices.
func TestStructuredResults(t *testing.T) {
	path, mod := module(t)
	c, err := New(client.WithCheckpointPath(path), client.WithDevice("cpu"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	call := func(method string) []any {
		out, err := mod.Call(ctx, method, map[string]any{"x": input()}, engine.CallOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return out.([]any)
	}

	enc, err := c.Encode(ctx, EncodeParams{X: input()})
	if err != nil {
		t.Fatal(err)
	}
	want := call("forward")
	same(t, "hidden (position 0)", enc.Hidden, want[0])
	same(t, "pooled (position 1)", enc.Pooled.Vector, want[1])

	sp, err := c.Split(ctx, SplitParams{X: input()})
	if err != nil {
		t.Fatal(err)
	}
	want = call("split")
	same(t, "total", sp.Total, want[0])
	parts := want[1].([]any)
	if len(sp.Parts) != len(parts) {
		t.Fatalf("parts: %d tensors, want %d", len(sp.Parts), len(parts))
	}
	for i := range parts {
		same(t, "parts element", sp.Parts[i], parts[i])
	}

	py, err := c.Pyramid(ctx, PyramidParams{X: input()})
	if err != nil {
		t.Fatal(err)
	}
	levels := call("pyramid")
	if len(py.Levels) != 3 {
		t.Fatalf("levels: %d tensors, want 3", len(py.Levels))
	}
	for i := range levels {
		same(t, "levels element", py.Levels[i], levels[i])
	}
}

// A module whose tuple does not match the manifest fails the load, naming
// the artifacts and the tuple's elements.
func TestStructuredContract(t *testing.T) {
	path := filepath.Join(t.TempDir(), "structured.pt")
	bad := `
def forward(self, x: Tensor) -> Tuple[Tensor, int]:
    return x, 1

def split(self, x: Tensor) -> Tuple[Tensor, Tensor]:
    return x, x

def pyramid(self, x: Tensor) -> List[Tensor]:
    return [x]
`
	if err := torch.BuildModule(torch.ModuleSource{Source: bad}, path); err != nil {
		t.Fatal(err)
	}
	c, err := New(client.WithCheckpointPath(path), client.WithDevice("cpu"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, err = c.Encode(context.Background(), EncodeParams{X: input()})
	for _, want := range []string{
		`artifact "pooled": expected tuple element 1 of a type for artifact kind embedding (Tensor, floating [D] or [N,D]), found int (return Tuple[Tensor, int])`,
		`artifact "parts": expected tuple element 1 of a type for artifact kind tensor_list (List[Tensor]), found Tensor (return Tuple[Tensor, Tensor])`,
	} {
		if err == nil || !bytes.Contains([]byte(err.Error()), []byte(want)) {
			t.Errorf("load error %v does not say %q", err, want)
		}
	}
}

// namedBackend answers every call with outputs keyed by artifact id, as a
// server does: a client.Backend that is not in this process.
type namedBackend struct{ out map[string]any }

func (namedBackend) Spec() *spec.ModelInferenceSpec      { return Spec() }
func (namedBackend) Variant() *spec.InferenceVariantSpec { return &Spec().Variants[0] }
func (b namedBackend) Call(context.Context, *spec.InferenceTaskProfile, client.Inputs, ...client.CallOption) (map[string]any, error) {
	return b.out, nil
}
func (namedBackend) CallBatch(context.Context, *spec.InferenceTaskProfile, client.Inputs, func(int, map[string]any) error, ...batch.Option) error {
	return errors.New("no batches")
}
func (namedBackend) CallStream(context.Context, *spec.InferenceTaskProfile, client.Inputs, ...stream.Option) (*stream.Session, error) {
	return nil, errors.New("no streams")
}
func (namedBackend) Close() error { return nil }

// A backend outside this process gets tuple artifacts by name (the server
// maps the tuple) and tensor_list artifacts as lists (the remote client
// reassembles them from the wire, runtime/oip's lists.go): a task with
// one is no longer refused, and an empty list stays an empty slice.
func TestStructuredRemote(t *testing.T) {
	ctx := context.Background()
	h := tensor.FromFloat32([]float32{1, 2, 3}, 1, 3)
	p := tensor.FromFloat32([]float32{2}, 1)
	c := NewClient(namedBackend{map[string]any{"hidden": h, "pooled": p}})
	r, err := c.Encode(ctx, EncodeParams{X: tensor.FromFloat32([]float32{1, 2, 3}, 1, 3)})
	if err != nil || r.Hidden != h || r.Pooled.Vector != p {
		t.Errorf("encode through a remote backend: %+v, %v", r, err)
	}
	part := tensor.FromFloat32([]float32{1, 2}, 1, 2)
	sp, err := NewClient(namedBackend{map[string]any{"total": p, "parts": []*tensor.Tensor{part}}}).Split(ctx, SplitParams{X: input()})
	if err != nil || sp.Total != p || len(sp.Parts) != 1 || sp.Parts[0] != part {
		t.Errorf("split through a remote backend: %+v, %v", sp, err)
	}
	py, err := NewClient(namedBackend{map[string]any{"levels": []*tensor.Tensor{}}}).Pyramid(ctx, PyramidParams{X: input()})
	if err != nil || py.Levels == nil || len(py.Levels) != 0 {
		t.Errorf("pyramid through a remote backend: %+v, %v, want an empty list", py, err)
	}
}
