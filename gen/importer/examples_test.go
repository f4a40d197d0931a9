package importer

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/worldfoundry/wfgen/gen/validate"
	"github.com/worldfoundry/wfgen/runtime/artifactio"
	"github.com/worldfoundry/wfgen/runtime/contract"

	"github.com/worldfoundry/wfgen/runtime/engine"
	"github.com/worldfoundry/wfgen/runtime/spec"
	"github.com/worldfoundry/wfgen/runtime/tensor"
)

// shapeText writes a declared shape as in messages, or "none".
func shapeText(s spec.Shape) string {
	if s == nil {
		return "none"
	}
	return s.String()
}

// TestSkeletonTensorTODOs checks that, without examples, every tensor field
// and tensor artifact carries a TODO comment about its dtype and shape and
// declares neither.
func TestSkeletonTensorTODOs(t *testing.T) {
	t.Parallel()
	res, err := Skeleton(checkpoint, schemas, Options{})
	if err != nil {
		t.Fatal(err)
	}
	y := string(res.YAML)
	for _, want := range []string{
		"# TODO: dtype and shape: the schema says only Tensor. Add the ones the model wants (dtype: float32, shape: [N, 3, H, W]), or import again with --example x=FILE.npy\n",
		"--example mask=FILE.npy\n",
		"# TODO: dtype and shape of each tensor: the schema says only List[Tensor]. Add the ones the model wants, or import again with --example",
		"# TODO: dtype and shape of the tensor: the schema says only Tensor. Add the ones the model returns",
	} {
		if !strings.Contains(y, want) {
			t.Errorf("skeleton lacks %q:\n%s", want, y)
		}
	}
	if regexp.MustCompile(`(?m)^\s*-?\s*(dtype|shape|batching):`).MatchString(y) {
		t.Errorf("dtype, shape or batching without examples:\n%s", y)
	}
	// Four tensor artifacts (video, latents, encode_text's output) and the
	// json one: a TODO on each tensor one only.
	if n := strings.Count(y, "Add the ones the model returns"); n != 3 {
		t.Errorf("%d artifact TODOs, want 3:\n%s", n, y)
	}
}

func exampleSchemas() []engine.MethodSchema {
	return []engine.MethodSchema{{Name: "forward", Arguments: []engine.Argument{
		{Name: "pixels", Type: "Tensor"},
		{Name: "images", Type: "List[Tensor]", HasDefault: true, Default: []any{}},
		{Name: "mask", Type: "Optional[Tensor]", HasDefault: true},
		{Name: "scale", Type: "float", HasDefault: true, Default: 1.0},
	}, Returns: []string{"Dict[str, Tensor]"}}}
}

func TestSkeletonExamples(t *testing.T) {
	t.Parallel()
	ck := checkpoint
	ck.ReturnKeys = map[string][]contract.ReturnKey{"forward": {{Name: "logits", Always: true}, {Name: "pooled", Always: true}, {Name: "extra"}}}
	ck.Outputs = map[string]Output{"forward": {
		"logits": tensor.FromFloat32(make([]float32, 4*10), 4, 10),
		"pooled": tensor.FromFloat32(make([]float32, 7), 7), // not per item
	}}
	ex := map[string]Example{
		"pixels": {File: "dir/pixels.npy", Tensor: tensor.FromFloat32(make([]float32, 4*3*8*6), 4, 3, 8, 6)},
		"mask":   {File: "mask.npy", Tensor: tensor.FromUint8(make([]uint8, 4*8*6), 4, 8, 6)},
	}
	for _, batched := range []bool{false, true} {
		res, err := Skeleton(ck, exampleSchemas(), Options{Examples: ex, Batched: batched})
		if err != nil {
			t.Fatal(err)
		}
		f, diags := validate.Bytes("x.yaml", res.YAML)
		if len(diags) > 0 {
			t.Fatalf("batched %v: %v\n%s", batched, diags, res.YAML)
		}
		task := f.Spec.Tasks[0]
		got := map[string]string{}
		for _, in := range task.Inputs {
			got[in.FieldID] = string(in.DType) + shapeText(in.Shape)
		}
		for _, a := range task.Outputs {
			got[a.ArtifactID] = string(a.DType) + shapeText(a.Shape)
		}
		want := map[string]string{
			"pixels": "float32[4,3,8,6]", "mask": "uint8[4,8,6]", "scale": "none",
			"logits": "float32[4,10]", "pooled": "float32[7]", "extra": "none",
		}
		if batched {
			want = map[string]string{
				"pixels": "float32[N,3,8,6]", "mask": "uint8[N,8,6]", "scale": "none",
				"logits": "float32[N,10]", "pooled": "float32none", "extra": "none",
			}
			if task.Batching == nil || task.Batching.Dim != "N" || task.Batching.MaxBatchSize != 4 {
				t.Errorf("batching %+v, want dim N, max_batch_size 4", task.Batching)
			}
			if !slices.ContainsFunc(res.Warnings, func(w string) bool {
				return strings.Contains(w, "artifact pooled: forward returned float32[7] for a batch of 4, not one row per item")
			}) {
				t.Errorf("no warning about pooled: %v", res.Warnings)
			}
		} else if task.Batching != nil {
			t.Errorf("batching without --batched: %+v", task.Batching)
		}
		for k, v := range want {
			if got[k] != v {
				t.Errorf("batched %v: %s is %s, want %s", batched, k, got[k], v)
			}
		}
		y := string(res.YAML)
		for _, w := range []string{
			`# TODO: shape from example pixels.npy; name the sizes that vary between calls (H, W) or use "*"`,
			"# TODO: shape as forward returned it on the examples",
		} {
			if !strings.Contains(y, w) {
				t.Errorf("batched %v: no %q in\n%s", batched, w, y)
			}
		}
		if batched && !strings.Contains(y, "# TODO: the most items one call may take (the examples hold 4)") {
			t.Errorf("no max_batch_size TODO:\n%s", y)
		}
		// Where the skeleton writes batching, it says what invariant: true
		// would change (README, docs/batching.md).
		if want := "    # Add invariant: true for answers that never depend on the batch: the same bits\n" +
			"    # for an item alone or in any batch, in process and from wfserve -batch (which is\n" +
			"    # batch-invariant by default). Without it a single call and a batched one may\n" +
			"    # differ in the last bits. The cost is padding (docs/batching.md, batch-invariant mode).\n" +
			"    batching:\n"; batched != strings.Contains(y, want) {
			t.Errorf("batched %v: the invariant comment on batching is wrong or missing in\n%s", batched, y)
		}
	}
}

func TestSkeletonExampleErrors(t *testing.T) {
	t.Parallel()
	f32 := func(shape ...int64) Example {
		n := int64(1)
		for _, d := range shape {
			n *= d
		}
		return Example{File: "e.npy", Tensor: tensor.FromFloat32(make([]float32, n), shape...)}
	}
	for _, c := range []struct {
		ex      map[string]Example
		batched bool
		want    string
	}{
		{map[string]Example{"nope": f32(2)}, false, "--example nope: no imported method has an argument nope (forward(pixels, images, mask, scale))"},
		{map[string]Example{"scale": f32(2)}, false, "--example scale: argument scale of forward is float; examples are for Tensor and List[Tensor] arguments"},
		{map[string]Example{"pixels": f32()}, true, "--example pixels: a scalar has no batch dimension"},
		{map[string]Example{"pixels": f32(2, 3), "mask": f32(3, 3)}, true, "--batched: the examples of forward disagree on the batch size (first dimension): 3 and 2 (pixels)"},
		{map[string]Example{"mask": f32(2, 3)}, true, "--batched: forward takes no required Tensor argument with an example"},
		{map[string]Example{"pixels": {File: "x.npy"}}, false, "--example pixels: no tensor"},
		{map[string]Example{"pixels": f32(2).Add(f32(2))}, false, "--example pixels: argument pixels of forward is Tensor, one tensor, and has 2 examples; only a List[Tensor] argument takes several"},
		{map[string]Example{"images": f32(3, 4)}, true, "--example images: argument images of forward is List[Tensor], which batching does not stack"},
		{map[string]Example{"pixels": {File: "x.npy", Tensor: &tensor.Tensor{DType: tensor.Float32, Shape: []int64{2}}}}, false, "needs 8 bytes, has 0"},
	} {
		_, err := Skeleton(checkpoint, exampleSchemas(), Options{Examples: c.ex, Batched: c.batched})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v batched=%v: error %v, want %q", c.ex, c.batched, err, c.want)
		}
	}
}

func TestReadExample(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	good := filepath.Join(dir, "tokens.npy")
	if err := artifactio.WriteNPY(good, tensor.FromInt64([]int64{1, 2, 3, 4, 5, 6}, 2, 3)); err != nil {
		t.Fatal(err)
	}
	name, ex, err := ReadExample("tokens=" + good)
	if err != nil || name != "tokens" || ex.File != good || ex.Tensor.DType != tensor.Int64 || !slices.Equal(ex.Tensor.Shape, []int64{2, 3}) {
		t.Fatalf("ReadExample: %q %+v %v", name, ex, err)
	}
	bad := filepath.Join(dir, "bad.npy")
	if err := os.WriteFile(bad, []byte("not numpy"), 0o644); err != nil {
		t.Fatal(err)
	}
	for arg, want := range map[string]string{
		"tokens":                      `--example "tokens": want NAME=FILE.npy`,
		"=x.npy":                      "want NAME=FILE.npy",
		"tokens=":                     "want NAME=FILE.npy",
		"1x=" + good:                  `"1x" is not an argument name`,
		"tokens=" + bad:               "--example tokens: " + bad + ": npy: not a .npy file",
		"tokens=" + dir + "/none.npy": "no such file",
	} {
		if _, _, err := ReadExample(arg); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ReadExample(%q): %v, want %q", arg, err, want)
		}
	}
}

// A List[Tensor] argument takes one example per item (--example repeated):
// its field gets the dtype they share and a shape with "*" where their
// sizes differ, and the method is run on the list.
func TestSkeletonListExample(t *testing.T) {
	t.Parallel()
	img := func(h, w int64) Example {
		return Example{File: "img.npy", Tensor: tensor.FromFloat32(make([]float32, 3*h*w), 3, h, w)}
	}
	ex := map[string]Example{"pixels": {File: "p.npy", Tensor: tensor.FromFloat32(make([]float32, 6), 2, 3)}, "images": img(8, 6).Add(img(8, 4))}
	res, err := Skeleton(checkpoint, exampleSchemas(), Options{Examples: ex})
	if err != nil {
		t.Fatal(err)
	}
	f, diags := validate.Bytes("x.yaml", res.YAML)
	if len(diags) > 0 {
		t.Fatalf("%v\n%s", diags, res.YAML)
	}
	for _, in := range f.Spec.Tasks[0].Inputs {
		if in.FieldID == "images" {
			if got := string(in.DType) + shapeText(in.Shape); got != "float32[3,8,*]" {
				t.Errorf("images: %s, want float32[3,8,*]\n%s", got, res.YAML)
			}
		}
	}
	if want := `# TODO: each item's shape from the 2 items of example img.npy ("*" where they differ)`; !strings.Contains(string(res.YAML), want) {
		t.Errorf("no %q in\n%s", want, res.YAML)
	}
	if got := len(ex["images"].Items()); got != 2 {
		t.Errorf("Items: %d, want 2", got)
	}
}
