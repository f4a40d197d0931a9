package contract

import (
	"bytes"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// ReadCustomOps finds the ops of namespaces libtorch does not register,
// in every code file of the archive (submodules' too), once each, sorted;
// ops in string literals and comments, builtin namespaces and dotted
// names that are not op calls are not custom ops.
func TestReadCustomOps(t *testing.T) {
	t.Parallel()
	data := archive(t, map[string]string{
		"net/data.pkl": pkl,
		"net/code/__torch__/pkg.py": netCode + `
  def detect(self: __torch__.pkg.Net, boxes: Tensor, scores: Tensor) -> Tensor:
    keep = ops.torchvision.nms(boxes, scores, 0.5)
    _0 = ops.aten.add(keep, 1)  # ops.fake.comment
    _1 = "ops.fake.string"
    _2 = ops.prim.NumToTensor(1)
    return ops.torchvision.nms(boxes, scores, 0.7)
`,
		"net/code/__torch__/pkg/heads.py": `class Head(Module):
  def forward(self: __torch__.pkg.heads.Head, x: Tensor) -> Tensor:
    _0 = torch.ops.my_ops.fused_head(x)
    _1 = ops.torchvision.roi_align(x, x, 1.0, 7, 7, 2, False)
    return self.ops.not_an.op.call(x)
`,
		"net/version": "3",
	})
	got, err := ReadCustomOps(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	want := []CustomOp{{"my_ops", "fused_head"}, {"torchvision", "nms"}, {"torchvision", "roi_align"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ReadCustomOps (-want +got):\n%s", diff)
	}
	if s := got[1].String(); s != "torchvision::nms" {
		t.Errorf("String() = %q", s)
	}

	plain := archive(t, map[string]string{"net/data.pkl": pkl, "net/code/__torch__/pkg.py": netCode})
	if got, err := ReadCustomOps(bytes.NewReader(plain), int64(len(plain))); err != nil || got != nil {
		t.Errorf("an archive without custom ops: %v, %v", got, err)
	}
	if _, err := ReadCustomOps(bytes.NewReader([]byte("not a zip")), 9); err == nil || !strings.Contains(err.Error(), "not a TorchScript archive") {
		t.Errorf("not a zip: %v", err)
	}
}
