//go:build cgo

package goldenrecords

// Hand-written tests of the generated package (wfgen leaves files without
// its header alone, so they survive regeneration): the typed results of
// dict and list-of-dict returns, from a real TorchScript module run by
// libtorch.

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/worldfoundry/wfgen/runtime/client"
	"github.com/worldfoundry/wfgen/runtime/engine"
	"github.com/worldfoundry/wfgen/runtime/oip"
	"github.com/worldfoundry/wfgen/runtime/spec"
	"github.com/worldfoundry/wfgen/runtime/tensor"
	"github.com/worldfoundry/wfgen/runtime/torch"
)

// source is the module the manifest describes: forward returns what a
// torchvision detector does in evaluation — empty losses and one dict per
// image, image i with i+1 detections (and a key the manifest does not
// declare); heads returns one dict.
const source = `
def forward(self, x: Tensor) -> Tuple[Dict[str, Tensor], List[Dict[str, Tensor]]]:
    losses: Dict[str, Tensor] = {}
    detections: List[Dict[str, Tensor]] = []
    for i in range(x.size(0)):
        boxes = torch.tanh(torch.matmul(x[i, :i + 1], self.w))
        detections.append({"boxes": boxes, "labels": torch.argmax(boxes, dim=1), "scores": boxes.sum(dim=1), "masks": boxes > 0})
    return losses, detections

def heads(self, x: Tensor) -> Dict[str, Tensor]:
    return {"mean": x.mean(dim=0), "max": x.amax(dim=0), "unused": x}
`

// input is a batch of 2 images of 3 candidate boxes.
func input() *tensor.Tensor {
	v := make([]float32, 2*3*4)
	for i := range v {
		v[i] = float32(i)*0.125 - 1
	}
	return tensor.FromFloat32(v, 2, 3, 4)
}

// module builds a module from src and returns its path and the module
// loaded directly through the engine, to compare with.
func module(t *testing.T, src string) (string, engine.Module) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "records.pt")
	w := make([]float32, 16)
	for i := range w {
		w[i] = float32(i%5)*0.25 - 0.5
	}
	if err := torch.BuildModule(torch.ModuleSource{Source: src, Parameters: map[string]*tensor.Tensor{"w": tensor.FromFloat32(w, 4, 4)}}, path); err != nil {
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

// The typed results hold, bit for bit, what the module returned: the
// losses dict as a struct (no keys: every field nil), the detections as a
// slice of structs, one per image with its own number of boxes, and the
// only artifact of heads as the dict the method returns.
func TestRecordResults(t *testing.T) {
	path, mod := module(t, source)
	c, err := New(client.WithCheckpointPath(path), client.WithDevice("cpu"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	call := func(method string) any {
		out, err := mod.Call(ctx, method, map[string]any{"x": input()}, engine.CallOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return out
	}

	r, err := c.Detect(ctx, DetectParams{X: input()})
	if err != nil {
		t.Fatal(err)
	}
	if r.Losses == nil || r.Losses.Classification != nil || r.Losses.BboxRegression != nil {
		t.Errorf("losses = %+v, want an empty record", r.Losses)
	}
	want := call("forward").([]any)[1].([]any)
	if len(r.Detections) != 2 || len(want) != 2 {
		t.Fatalf("detections: %d, want %d (2 images)", len(r.Detections), len(want))
	}
	for i, d := range r.Detections {
		w := want[i].(map[string]any)
		same(t, "boxes", d.Boxes, w["boxes"])
		same(t, "labels", d.Labels, w["labels"])
		same(t, "scores", d.Scores, w["scores"])
		if d.Boxes.Shape[0] != int64(i+1) || d.Labels.DType != tensor.Int64 {
			t.Errorf("image %d: boxes %v, labels %s", i, d.Boxes.Shape, d.Labels.DType)
		}
	}

	h, err := c.Heads(ctx, HeadsParams{X: input()})
	if err != nil {
		t.Fatal(err)
	}
	hw := call("heads").(map[string]any)
	same(t, "mean", h.Heads.Mean, hw["mean"])
	same(t, "max", h.Heads.Maximum, hw["max"])
	if h.Heads.Aux != nil {
		t.Errorf("aux = %v, want nil (the dict has no such key)", h.Heads.Aux)
	}
}

// A dict without a required key, or whose tensor breaks its field's
// declared dtype or shape, is an error naming the key and the dict.
func TestRecordErrors(t *testing.T) {
	for _, tc := range []struct {
		name, forward, want string
	}{
		{"a missing key", `
def forward(self, x: Tensor) -> Tuple[Dict[str, Tensor], List[Dict[str, Tensor]]]:
    losses: Dict[str, Tensor] = {}
    return losses, [{"boxes": x[0], "labels": x[0, :, 0].long(), "scores": x[0, :, 0]}, {"boxes": x[1], "labels": x[1, :, 0].long()}]
`, `artifact "detections": element 1: required key(s) "scores" missing: the dict has the keys "boxes", "labels"`},
		{"a dtype", `
def forward(self, x: Tensor) -> Tuple[Dict[str, Tensor], List[Dict[str, Tensor]]]:
    losses: Dict[str, Tensor] = {}
    return losses, [{"boxes": x[0], "labels": x[0, :, 0], "scores": x[0, :, 0]}]
`, `artifact "detections"[0] key "labels": want int64[K], got float32[3]`},
		{"a dimension within one dict", `
def forward(self, x: Tensor) -> Tuple[Dict[str, Tensor], List[Dict[str, Tensor]]]:
    losses: Dict[str, Tensor] = {}
    return losses, [{"boxes": x[0], "labels": x[0, :2, 0].long(), "scores": x[0, :, 0]}]
`, `artifact "detections"[0] key "labels": want int64[K], got int64[2]: K is 2 here but 3 in "detections"[0] key "boxes"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := tc.forward + `
def heads(self, x: Tensor) -> Dict[str, Tensor]:
    return {"mean": x}
`
			path, _ := module(t, src)
			c, err := New(client.WithCheckpointPath(path), client.WithDevice("cpu"))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			_, err = c.Detect(context.Background(), DetectParams{X: input()})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v\nwant it to say %s", err, tc.want)
			}
		})
	}
}

// A module whose return types are not the manifest's dicts fails the
// load, naming the artifacts and the types.
func TestRecordContract(t *testing.T) {
	path, _ := module(t, `
def forward(self, x: Tensor) -> Tuple[Dict[str, Tensor], List[Tensor]]:
    losses: Dict[str, Tensor] = {}
    return losses, [x]

def heads(self, x: Tensor) -> Tensor:
    return x
`)
	c, err := New(client.WithCheckpointPath(path), client.WithDevice("cpu"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, err = c.Detect(context.Background(), DetectParams{X: input()})
	for _, want := range []string{
		`artifact "detections": expected tuple element 1 of a type for artifact kind record_list (List[Dict[str, Tensor]], each dict with the fields' keys), found List[Tensor]`,
		`artifact "heads": expected a return type for artifact kind record (Dict[str, Tensor] with the fields' keys), found Tensor`,
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("load error %v does not say %q", err, want)
		}
	}
}

// wireBackend runs every call in this process and hands back its outputs
// as a remote backend does: encoded onto the Open Inference Protocol's
// named tensors (oip.EncodeResponse), sent as JSON and decoded
// (oip.DecodeResponse). It is not a client.Loader: a client.Backend
// outside this process.
type wireBackend struct{ client.Backend }

func (w wireBackend) Call(ctx context.Context, task *spec.InferenceTaskProfile, in client.Inputs, opts ...client.CallOption) (map[string]any, error) {
	out, err := w.Backend.Call(ctx, task, in, opts...)
	if err != nil {
		return nil, err
	}
	resp := &oip.InferenceResponse{ModelName: FamilyID}
	if err := oip.EncodeResponse(resp, task, out, nil, nil); err != nil {
		return nil, err
	}
	b, err := json.Marshal(resp)
	if err != nil {
		return nil, err
	}
	var back oip.InferenceResponse
	if err := json.Unmarshal(b, &back); err != nil {
		return nil, err
	}
	return oip.DecodeResponse(task, &back)
}

// A backend outside this process runs record tasks (they were refused
// before the wire mapping carried them): through the mapping, the
// results equal the in-process ones bit for bit — the empty losses record
// non-nil, each image's detections, heads without its optional key.
func TestRecordRemote(t *testing.T) {
	path, _ := module(t, source)
	b, err := client.New(family, client.WithCheckpointPath(path), client.WithDevice("cpu"))
	if err != nil {
		t.Fatal(err)
	}
	local := NewClient(b)
	defer local.Close()
	remote := NewClient(wireBackend{b})
	ctx := context.Background()

	want, err := local.Detect(ctx, DetectParams{X: input()})
	if err != nil {
		t.Fatal(err)
	}
	got, err := remote.Detect(ctx, DetectParams{X: input()})
	if err != nil {
		t.Fatal(err)
	}
	if got.Losses == nil || got.Losses.Classification != nil || got.Losses.BboxRegression != nil {
		t.Errorf("losses = %+v, want an empty record", got.Losses)
	}
	if len(got.Detections) != len(want.Detections) {
		t.Fatalf("%d detections, want %d", len(got.Detections), len(want.Detections))
	}
	for i, d := range want.Detections {
		same(t, "boxes", got.Detections[i].Boxes, d.Boxes)
		same(t, "labels", got.Detections[i].Labels, d.Labels)
		same(t, "scores", got.Detections[i].Scores, d.Scores)
	}
	h, err := remote.Heads(ctx, HeadsParams{X: input()})
	if err != nil {
		t.Fatal(err)
	}
	hw, err := local.Heads(ctx, HeadsParams{X: input()})
	if err != nil {
		t.Fatal(err)
	}
	same(t, "mean", h.Heads.Mean, hw.Heads.Mean)
	same(t, "max", h.Heads.Maximum, hw.Heads.Maximum)
	if h.Heads.Aux != nil {
		t.Errorf("aux = %v, want nil", h.Heads.Aux)
	}
}
