package goldenkinds

// Hand-written tests of the generated package (wfgen leaves files without
// its header alone, so they survive regeneration).

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/worldfoundry/wfgen/runtime/batch"
	"github.com/worldfoundry/wfgen/runtime/client"
	"github.com/worldfoundry/wfgen/runtime/engine"
	"github.com/worldfoundry/wfgen/runtime/spec"
	"github.com/worldfoundry/wfgen/runtime/stream"
	"github.com/worldfoundry/wfgen/runtime/tensor"
)

func image() *tensor.Tensor { return tensor.FromUint8(make([]uint8, 2*2*3), 2, 2, 3) }

func validParams() RunParams {
	p := DefaultRunParams()
	p.Prompt = "a cat"
	p.Count = 3
	p.Ratio = 0.5
	p.Image = image()
	return p
}

func TestDefaults(t *testing.T) {
	want := RunParams{
		Style:     "plain",
		NumFrames: 17,
		Height:    64,
		Guidance:  7.5,
		Enabled:   true,
		Tags:      []string{"a", "b"},
		Sizes:     []int64{16, 32},
		Mask:      []bool{true, false},
		Threads:   1,
	}
	if d := cmp.Diff(want, DefaultRunParams()); d != "" {
		t.Errorf("defaults (-want +got):\n%s", d)
	}
	// Every call builds new slices.
	a := DefaultRunParams()
	a.Tags[0] = "changed"
	if DefaultRunParams().Tags[0] != "a" {
		t.Error("DefaultRunParams shares its slices")
	}
}

func TestValidParamsPass(t *testing.T) {
	p := validParams()
	if err := p.Validate(); err != nil {
		t.Fatalf("Validate() = %v", err)
	}
	p.Seed, p.Strength, p.Weights = new(int64(0)), new(0.25), []float64{0, 1}
	p.Frames = []*tensor.Tensor{image()}
	if err := p.Validate(); err != nil {
		t.Fatalf("Validate() with optional fields set = %v", err)
	}
}

func TestValidateReportsEveryViolation(t *testing.T) {
	p := DefaultRunParams()
	p.Count = 0
	p.NumFrames = 16
	p.Height = 65
	p.Seed = new(int64(-1))
	p.Guidance = math.NaN()
	p.Strength = new(0.1)
	p.Image = &tensor.Tensor{DType: tensor.Float32, Shape: []int64{2}, Data: make([]byte, 3)}
	p.Tags = []string{"ok", "Bad", "x", "y", "z"}
	p.Sizes = []int64{8, 20}
	p.Weights = []float64{0.5, 2}
	p.Frames = []*tensor.Tensor{nil}
	p.Threads = 0
	err := p.Validate()
	if err == nil {
		t.Fatal("Validate() = nil")
	}
	want := []string{
		"prompt: is required",
		"count: must be at least 1, got 0",
		"num_frames: must be 8k+1 (a multiple of 8 plus 1), got 16",
		"height: must be a multiple of 16, got 65",
		"seed: must be at least 0, got -1",
		"guidance: must be at least 0, got NaN",
		"guidance: must be at most 20, got NaN",
		"strength: must be at least 0.25, got 0.1",
		"image: tensor: float32[2] needs 8 bytes, has 3",
		"tags: must have at most 4 items, has 5",
		`tags[1]: must match the pattern ^[a-z]+$, got "Bad"`,
		"sizes[0]: must be at least 16, got 8",
		"sizes[0]: must be a multiple of 16, got 8",
		"sizes[1]: must be a multiple of 16, got 20",
		"weights[1]: must be at most 1, got 2",
		"frames[0]: is nil",
		"threads: must be at least 1, got 0",
	}
	if d := cmp.Diff(want, strings.Split(err.Error(), "\n")); d != "" {
		t.Errorf("violations (-want +got):\n%s", d)
	}

	q := validParams()
	q.Prompt = strings.Repeat("é", 201)
	q.Tags = nil
	err = q.Validate()
	want = []string{"prompt: must have at most 200 characters, has 201", "tags: must have at least 1 item, has 0"}
	if err == nil || cmp.Diff(want, strings.Split(err.Error(), "\n")) != "" {
		t.Errorf("Validate() = %v, want %q", err, want)
	}
}

func TestJSONRoundTrip(t *testing.T) {
	p := validParams()
	p.Note = new("n")
	p.Seed = new(int64(7))
	p.Verbose = new(false)
	p.Weights = []float64{}
	p.Frames = []*tensor.Tensor{image()}
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	var q RunParams
	if err := json.Unmarshal(b, &q); err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(p, q); d != "" {
		t.Errorf("round trip (-sent +received):\n%s", d)
	}
}

func TestJSONAppliesDefaults(t *testing.T) {
	img, _ := json.Marshal(image())
	var p RunParams
	in := `{"prompt": "x", "count": 2, "ratio": 1, "image": ` + string(img) + `, "height": 32, "tags": null}`
	if err := json.Unmarshal([]byte(in), &p); err != nil {
		t.Fatal(err)
	}
	want := DefaultRunParams()
	want.Prompt, want.Count, want.Ratio, want.Image, want.Height, want.Tags = "x", 2, 1, image(), 32, nil
	if d := cmp.Diff(want, p); d != "" {
		t.Errorf("decoded (-want +got):\n%s", d)
	}
}

func TestJSONErrors(t *testing.T) {
	for in, want := range map[string]string{
		`{}`: "golden-kinds run params: missing required field(s) prompt, count, ratio, image",
		`{"prompt": "x", "count": 1, "ratio": 1, "image": null, "colour": 1}`: `unknown field "colour"`,
		`{"count": "three"}`: "cannot unmarshal string",
		`[1]`:                "cannot unmarshal array",
	} {
		var p RunParams
		err := json.Unmarshal([]byte(in), &p)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Unmarshal(%s) = %v, want an error containing %q", in, err, want)
		}
	}
}

func TestKwargsSplitByTarget(t *testing.T) {
	p := validParams()
	p.Seed = new(int64(5))
	p.DeviceMap = new("auto")
	img := p.Image
	want := map[string]any{
		"prompt": "a cat", "style": "plain", "count": int64(3), "num_frames": int64(17), "height": int64(64),
		"seed": int64(5), "guidance": 7.5, "ratio": 0.5, "enabled": true, "image": img,
		"tags": []any{"a", "b"}, "sizes": []any{int64(16), int64(32)}, "mask": []any{true, false},
	}
	if d := cmp.Diff(want, p.CallKwargs()); d != "" {
		t.Errorf("CallKwargs (-want +got):\n%s", d)
	}
	if d := cmp.Diff(map[string]any{"threads": int64(1), "device_map": "auto"}, p.LoadKwargs()); d != "" {
		t.Errorf("LoadKwargs (-want +got):\n%s", d)
	}
}

// outputsBackend answers every call with its outputs: a client.Backend
// that NewClient runs the typed methods on, without an engine or server.
type outputsBackend struct{ out map[string]any }

func (outputsBackend) Spec() *spec.ModelInferenceSpec      { return Spec() }
func (outputsBackend) Variant() *spec.InferenceVariantSpec { return &Spec().Variants[0] }
func (b outputsBackend) Call(context.Context, *spec.InferenceTaskProfile, client.Inputs, ...client.CallOption) (map[string]any, error) {
	return b.out, nil
}
func (outputsBackend) CallBatch(context.Context, *spec.InferenceTaskProfile, client.Inputs, func(int, map[string]any) error, ...batch.Option) error {
	return errors.New("no batches")
}
func (outputsBackend) CallStream(context.Context, *spec.InferenceTaskProfile, client.Inputs, ...stream.Option) (*stream.Session, error) {
	return nil, errors.New("no streams")
}
func (outputsBackend) Close() error { return nil }

func TestResultFromOutputs(t *testing.T) {
	out := map[string]any{
		"video":     tensor.FromUint8(make([]uint8, 2*4*4*3), 2, 4, 4, 3),
		"poster":    tensor.FromUint8(make([]uint8, 4*4*3), 4, 4, 3),
		"embedding": tensor.FromFloat32([]float32{1, 2, 3}, 3),
		"logits":    tensor.FromFloat32([]float32{1}, 1),
		"caption":   "a cat",
		"meta":      map[string]any{"k": "v"},
	}
	ctx := context.Background()
	c := NewClient(outputsBackend{out})
	r, err := c.Run(ctx, validParams())
	if err != nil {
		t.Fatal(err)
	}
	if r.Video == nil || r.Video.Frames != out["video"] || r.Poster == nil || r.Embedding == nil || r.Logits != out["logits"] {
		t.Errorf("tensor artifacts not mapped: %+v", r)
	}
	if r.Caption != "a cat" || r.Summary != nil || string(r.Meta) != `{"k":"v"}` {
		t.Errorf("caption %q, summary %v, meta %s", r.Caption, r.Summary, r.Meta)
	}

	delete(out, "caption")
	if _, err := c.Run(ctx, validParams()); err == nil || err.Error() != `golden-kinds run: artifact "caption": required, but the model returned none` {
		t.Errorf("missing required artifact: %v", err)
	}
	out["caption"] = "c"
	out["video"] = tensor.FromFloat32([]float32{1}, 1)
	if _, err := c.Run(ctx, validParams()); err == nil || !strings.HasPrefix(err.Error(), `golden-kinds run: artifact "video": video: want uint8`) {
		t.Errorf("wrong video: %v", err)
	}
}

func TestClientReturnsErrorsNeverPanics(t *testing.T) {
	c, err := New()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if c.Variant() != DefaultVariant {
		t.Errorf("Variant() = %q", c.Variant())
	}
	res, err := c.Run(context.Background(), validParams())
	if res != nil || err == nil {
		t.Fatalf("Run = %v, %v; want the no-engine error", res, err)
	}
	if _, engineErr := engine.DefaultEngine(); engineErr != nil && !errors.Is(err, engine.ErrNoEngine) {
		t.Errorf("Run error %v does not wrap engine.ErrNoEngine", err)
	}
	res, err = c.Run(context.Background(), RunParams{})
	if res != nil || err == nil || !strings.Contains(err.Error(), "golden-kinds run: invalid params: prompt: is required") {
		t.Errorf("Run with invalid params = %v, %v", res, err)
	}
	var zero Client
	if _, err := zero.Noop(context.Background(), NoopParams{}); err == nil || !strings.Contains(err.Error(), "not created with New") {
		t.Errorf("zero Client: %v", err)
	}
	if err := c.Close(); err != nil {
		t.Error(err)
	}
	if err := c.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if _, err := c.Noop(context.Background(), NoopParams{}); !errors.Is(err, engine.ErrClosed) {
		t.Errorf("use after Close: %v", err)
	}
}
