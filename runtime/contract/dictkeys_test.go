package contract

import (
	"bytes"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// detectorCode is shaped like torchvision's scripted SSD: forward returns
// an empty losses dict (evaluation) or compute_loss's, and the dicts
// postprocess_detections builds per image; a head's dict, which forward
// calls on a submodule rather than on self, is not forward's.
const detectorCode = `class Head(Module):
  def forward(self: __torch__.pkg.Head,
    x: Tensor) -> Dict[str, Tensor]:
    return {"cls_logits": x, "bbox_regression": x}
class Net(Module):
  __parameters__ = []
  head : __torch__.pkg.Head
  def forward(self: __torch__.pkg.Net,
    images: List[Tensor]) -> Tuple[Dict[str, Tensor], List[Dict[str, Tensor]]]:
    head = self.head
    head_outputs = (head).forward(images[0], )
    losses = annotate(Dict[str, Tensor], {})
    if self.training:
      losses0 = (self).compute_loss(head_outputs, )
    else:
      losses0 = losses
    detections = (self).postprocess_detections(head_outputs, )
    return (losses0, detections)
  def compute_loss(self: __torch__.pkg.Net,
    head_outputs: Dict[str, Tensor]) -> Dict[str, Tensor]:
    _0 = {"bbox_regression": head_outputs["bbox_regression"], "classification": head_outputs["cls_logits"]}
    return _0
  def postprocess_detections(self: __torch__.pkg.Net,
    head_outputs: Dict[str, Tensor]) -> List[Dict[str, Tensor]]:
    detections = annotate(List[Dict[str, Tensor]], [])
    for _1 in range(2):
      if bool(torch.gt(_1, 0)):
        _2 = {"boxes": head_outputs["bbox_regression"], "scores": head_outputs["cls_logits"], "labels": head_outputs["cls_logits"]}
        _3 = torch.append(detections, _2)
      else:
        _4 = {"boxes": head_outputs["bbox_regression"], "labels": head_outputs["cls_logits"], "masks": head_outputs["cls_logits"]}
        _5 = torch.append(detections, _4)
    return detections
  def plain(self: __torch__.pkg.Net,
    x: Tensor) -> Tensor:
    return x
`

// The keys of the dicts a method returns inside a structure come from the
// methods it calls on self that declare the dict's type; a key every
// literal holds is Always; an empty dict of tensors in the method's own
// code is reported.
func TestReadDictKeys(t *testing.T) {
	t.Parallel()
	data := archive(t, map[string]string{"net/data.pkl": pkl, "net/code/__torch__/pkg.py": detectorCode})
	got := ReadDictKeys(bytes.NewReader(data), int64(len(data)))
	want := map[string]DictKeys{
		"forward": {
			Returns: map[string][]ReturnKey{
				"Dict[str, Tensor]":       {{"bbox_regression", true}, {"classification", true}},
				"List[Dict[str, Tensor]]": {{"boxes", true}, {"scores", false}, {"labels", true}, {"masks", false}},
			},
			Empty: true,
		},
		// Dict[str, Tensor] arguments indexed only with literal keys.
		"compute_loss":           {Arguments: map[string][]string{"head_outputs": {"bbox_regression", "cls_logits"}}},
		"postprocess_detections": {Arguments: map[string][]string{"head_outputs": {"bbox_regression", "cls_logits"}}},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("ReadDictKeys (-want +got):\n%s", d)
	}
	if got := ReadDictKeys(bytes.NewReader([]byte("not a zip")), 9); got != nil {
		t.Errorf("not a zip: %v", got)
	}
}
