//go:build cgo

package importer

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/worldfoundry/wfgen/gen/validate"
	"github.com/worldfoundry/wfgen/runtime/tensor"
	"github.com/worldfoundry/wfgen/runtime/torch"
)

// structuredSource takes a list of images, a dict of tensors read by
// literal keys and a tuple.
const structuredSource = `
def forward(self, images: List[Tensor], features: Dict[str, Tensor], pair: Tuple[Tensor, Tensor]) -> Tensor:
    s = features["a"] + features["b"]
    for im in images:
        s = s + im.sum()
    a, b = pair
    return s * a + b
`

// Import of a module built by libtorch: the dict's keys come from the
// code, the tuple gets one part per element, and the List[Tensor]
// argument's examples (one per item) give its dtype and shape, "*" where
// the items differ. The skeleton validates against the checkpoint.
func TestImportStructuredArguments(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ckpt := filepath.Join(dir, "structured.pt")
	if err := torch.BuildModule(torch.ModuleSource{Source: structuredSource}, ckpt); err != nil {
		t.Fatal(err)
	}
	img := func(h, w int64) Example {
		return Example{File: "img.npy", Tensor: tensor.FromFloat32(make([]float32, 3*h*w), 3, h, w)}
	}
	out := filepath.Join(dir, "structured.yaml")
	res, err := Import(torch.Default(), ckpt, Options{Output: out, Examples: map[string]Example{"images": img(4, 6).Add(img(4, 2))}})
	if err != nil {
		t.Fatal(err)
	}
	if err := WriteFile(out, res.YAML); err != nil {
		t.Fatal(err)
	}
	f, diags, err := validate.File(out)
	if err != nil || len(diags) > 0 {
		t.Fatalf("validate: %v %v\n%s", err, diags, res.YAML)
	}
	got := map[string]string{}
	for _, in := range f.Spec.Tasks[0].Inputs {
		var parts []string
		for _, p := range in.Fields {
			parts = append(parts, p.Name)
		}
		got[in.FieldID] = string(in.Kind) + " " + string(in.DType) + shapeText(in.Shape) + " " + strings.Join(parts, ",")
	}
	for id, want := range map[string]string{
		"images":   "tensor_list float32[3,4,*] ",
		"features": "tensor_dict none a,b",
		"pair":     "tensor_tuple none item0,item1",
	} {
		if got[id] != want {
			t.Errorf("%s: %q, want %q\n%s", id, got[id], want, res.YAML)
		}
	}
}
