// Package imagemodel builds the image classifier of image-classifier.yaml
// (a float32 [3, 224, 224] image in, float32 [10] logits out) from
// TorchScript source with deterministic weights, for the tests and the
// benchmark of the binary tensor data extension.
package imagemodel

import (
	"math/rand/v2"
	"path/filepath"
	"runtime"

	"github.com/worldfoundry/wfgen/examples/tinymodels"
	"github.com/worldfoundry/wfgen/runtime/torch"

	"github.com/worldfoundry/wfgen/runtime/tensor"
)

// Source is the classifier's TorchScript: 16×16 average pooling to a
// [3, 14, 14] grid, then one linear layer.
const Source = `
def forward(self, image: Tensor) -> Tensor:
    x = torch.avg_pool2d(image.unsqueeze(0), [16, 16]).flatten(1)
    return torch.addmm(self.b, x, self.w).squeeze(0)
`

// Checkpoint is the checkpoint's path under the checkpoint root, as the
// manifest names it.
const Checkpoint = "checkpoints/image-classifier.pt"

// Manifest returns the path of image-classifier.yaml.
func Manifest() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "image-classifier.yaml")
}

// Build writes the checkpoint under the checkpoint root dir.
func Build(dir string) error {
	r := rand.New(rand.NewPCG(5, 6))
	w := make([]float32, 588*10)
	for i := range w {
		w[i] = float32(r.NormFloat64() * 0.05)
	}
	return tinymodels.BuildSource(filepath.Join(dir, Checkpoint), torch.ModuleSource{Source: Source, Parameters: map[string]*tensor.Tensor{
		"w": tensor.FromFloat32(w, 588, 10),
		"b": tensor.FromFloat32(make([]float32, 10), 10),
	}})
}

// Image returns a deterministic image, normalised as the manifest says
// (values around [-2, 2.6]), seeded by seed.
func Image(seed uint64) *tensor.Tensor {
	r := rand.New(rand.NewPCG(seed, 7))
	v := make([]float32, 3*224*224)
	for i := range v {
		v[i] = (r.Float32() - 0.45) / 0.226
	}
	return tensor.FromFloat32(v, 3, 224, 224)
}
