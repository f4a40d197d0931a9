package contract

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// dictKeysOf reads the DictKeys of an archive of the root class
// __torch__.pkg.Net whose code is files (paths under net/code/).
func dictKeysOf(t *testing.T, files map[string]string) map[string]DictKeys {
	t.Helper()
	zipped := map[string]string{"net/data.pkl": pkl}
	for p, code := range files {
		zipped["net/code/"+p] = code
	}
	data := archive(t, zipped)
	return ReadDictKeys(bytes.NewReader(data), int64(len(data)))
}

// detectorCode is shaped like torchvision's scripted SSD: forward returns
// an empty losses dict (evaluation) or compute_loss's, and the dicts
// postprocess_detections builds per image; a head's dict, which forward
// calls on a submodule, is not forward's.
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

// The keys of the dicts a method returns, by tuple position: a key every
// dict literal holds is Always, one only some hold is not, and the keys of
// a dict only a training branch builds are listed, optional (evaluation
// returns the empty dict).
func TestReadDictKeys(t *testing.T) {
	t.Parallel()
	got := dictKeysOf(t, map[string]string{"__torch__/pkg.py": detectorCode})
	want := map[string]DictKeys{
		"forward": {Values: []ValueKeys{
			{Keys: []ReturnKey{{"bbox_regression", false}, {"classification", false}}, Complete: true},
			{Keys: []ReturnKey{{"boxes", true}, {"scores", false}, {"labels", true}, {"masks", false}}, Complete: true},
		}},
		// (with Dict[str, Tensor] arguments indexed only with literal keys)
		"compute_loss": {Values: []ValueKeys{{Keys: []ReturnKey{{"bbox_regression", true}, {"classification", true}}, Complete: true}},
			Arguments: map[string][]string{"head_outputs": {"bbox_regression", "cls_logits"}}},
		"postprocess_detections": {Values: []ValueKeys{{Keys: []ReturnKey{{"boxes", true}, {"scores", false}, {"labels", true}, {"masks", false}}, Complete: true}},
			Arguments: map[string][]string{"head_outputs": {"bbox_regression", "cls_logits"}}},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("ReadDictKeys (-want +got):\n%s", d)
	}
	if got := ReadDictKeys(bytes.NewReader([]byte("not a zip")), 9); got != nil {
		t.Errorf("not a zip: %v", got)
	}
}

// rcnnCode is shaped like torchvision's scripted Mask R-CNN: forward
// returns what submodules build, through tuple unpacking, a method of
// another submodule that returns its argument with items set, and a
// losses dict updated from the submodules' (empty in evaluation).
const rcnnCode = `class Net(Module):
  __parameters__ = []
  training : bool
  transform : __torch__.pkg.transform.Transform
  roi_heads : __torch__.pkg.roi_heads.___torch_mangle_7.RoIHeads
  def forward(self: __torch__.pkg.Net,
    images: List[Tensor]) -> Tuple[Dict[str, Tensor], List[Dict[str, Tensor]]]:
    roi_heads = self.roi_heads
    _0 = (roi_heads).forward(images, )
    detections, detector_losses, = _0
    transform0 = self.transform
    detections0 = (transform0).postprocess(detections, images, )
    losses = annotate(Dict[str, Tensor], {})
    torch.update(losses, detector_losses)
    return (losses, detections0)
`

const roiHeadsCode = `class RoIHeads(Module):
  __parameters__ = []
  training : bool
  def forward(self: __torch__.pkg.roi_heads.___torch_mangle_7.RoIHeads,
    images: List[Tensor]) -> Tuple[List[Dict[str, Tensor]], Dict[str, Tensor]]:
    _0 = __torch__.pkg.roi_heads.mask_inference
    result = annotate(List[Dict[str, Tensor]], [])
    losses = annotate(Dict[str, Tensor], {})
    training = self.training
    if training:
      losses1 = {"loss_classifier": images[0], "loss_box_reg": images[0]}
      losses0 = losses1
    else:
      for i in range(torch.len(images)):
        _1 = {"boxes": images[i], "labels": images[i], "scores": images[i]}
        _2 = torch.append(result, _1)
      losses0 = losses
    if (self).has_mask():
      masks_probs = _0(images, )
      _3 = [torch.len(masks_probs), torch.len(result)]
      for _4 in range(ops.prim.min(_3)):
        mask_prob = masks_probs[_4]
        r0 = result[_4]
        torch._set_item(r0, "masks", mask_prob)
    else:
      pass
    if (self).has_keypoint():
      for _5 in range(torch.len(result)):
        r1 = result[_5]
        torch._set_item(r1, "keypoints", images[0])
    else:
      pass
    for _6 in range(torch.len(images)):
      r2 = result[_6]
      torch._set_item(r2, "extra", images[0])
    r3 = result[0]
    torch._set_item(r3, "first", images[0])
    return (result, losses0)
  def has_mask(self: __torch__.pkg.roi_heads.___torch_mangle_7.RoIHeads) -> bool:
    return True
  def has_keypoint(self: __torch__.pkg.roi_heads.___torch_mangle_7.RoIHeads) -> bool:
    return False
`

const roiHeadsFuncs = `def mask_inference(x: List[Tensor]) -> List[Tensor]:
  return x
`

const transformCode = `class Transform(Module):
  __parameters__ = []
  training : bool
  def postprocess(self: __torch__.pkg.transform.Transform,
    result: List[Dict[str, Tensor]],
    images: List[Tensor]) -> List[Dict[str, Tensor]]:
    training = self.training
    if training:
      pass
    else:
      _0 = [9223372036854775807, torch.len(result), torch.len(images)]
      for i in range(ops.prim.min(_0)):
        pred = result[i]
        torch._set_item(result[i], "boxes", images[i])
        if torch.__contains__(pred, "masks"):
          torch._set_item(result[i], "masks", images[i])
        else:
          pass
        if torch.__contains__(pred, "keypoints"):
          torch._set_item(result[i], "keypoints", images[i])
        else:
          pass
    return result
`

// The detections of a Mask R-CNN come from a submodule's method, through a
// method of another submodule: appended dict literals give boxes, labels
// and scores on each dict; a loop over every dict of the list gives masks
// to each (Always), one over another list's length only some (extra), an
// item of one element only that one (first); the keypoints a constant
// has_keypoint() skips are not listed, and postprocess, which sets masks
// and keypoints only on dicts that have them, adds neither. The losses are
// updated from the submodule's, which only training fills.
func TestReadDictKeysSubmodules(t *testing.T) {
	t.Parallel()
	got := dictKeysOf(t, map[string]string{
		"__torch__/pkg.py": rcnnCode,
		"__torch__/pkg/roi_heads/___torch_mangle_7.py": roiHeadsCode,
		"__torch__/pkg/roi_heads.py":                   roiHeadsFuncs,
		"__torch__/pkg/transform.py":                   transformCode,
	})
	want := map[string]DictKeys{
		"forward": {Values: []ValueKeys{
			{Keys: []ReturnKey{{"loss_classifier", false}, {"loss_box_reg", false}}, Complete: true},
			{Keys: []ReturnKey{{"boxes", true}, {"labels", true}, {"scores", true}, {"masks", true}, {"extra", false}, {"first", false}}, Complete: true},
		}},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("ReadDictKeys (-want +got):\n%s", d)
	}
}

// A dict handed to code the reader does not follow (a function the
// archive does not define, a key computed at run time) may hold any key:
// the value is not Complete, and Why says where the code stops telling.
func TestReadDictKeysUnknown(t *testing.T) {
	t.Parallel()
	const code = `class Net(Module):
  __parameters__ = []
  def forward(self: __torch__.pkg.Net,
    x: Tensor, k: str) -> Tuple[Dict[str, Tensor], List[Dict[str, Tensor]], Dict[str, Tensor]]:
    _0 = __torch__.pkg.elsewhere.fill
    d = {"a": x}
    _1 = _0(d, )
    out = annotate(List[Dict[str, Tensor]], [])
    e = annotate(Dict[str, Tensor], {})
    torch._set_item(e, k, x)
    _2 = torch.append(out, e)
    return (d, out, (self).opaque(x, ))
  def opaque(self: __torch__.pkg.Net,
    x: Tensor) -> Dict[str, Tensor]:
    return ops.mylib.make(x)
`
	got := dictKeysOf(t, map[string]string{"__torch__/pkg.py": code})["forward"]
	if len(got.Values) != 3 {
		t.Fatalf("got %+v", got)
	}
	for i, want := range []string{
		"code/__torch__/pkg.py:7 (Net.forward): passed to __torch__.pkg.elsewhere.fill, whose code this reader does not follow",
		"code/__torch__/pkg.py:10 (Net.forward): an item assigned with a key computed at run time",
		"code/__torch__/pkg.py:15 (Net.opaque): passed to ops.mylib.make, which this reader does not follow",
	} {
		if v := got.Values[i]; v.Complete || v.Why != want {
			t.Errorf("value %d: %+v, want not complete, why %q", i, v, want)
		}
	}
	if k := got.Values[0].Keys; len(k) != 1 || k[0].Name != "a" {
		t.Errorf("value 0 keys %v", k)
	}
}

// Code the reader cannot parse, or that never returns, gives no keys and
// no panic.
func TestReadDictKeysMalformed(t *testing.T) {
	t.Parallel()
	for _, code := range []string{
		"class Net(Module):\n  def forward(self: __torch__.pkg.Net) -> Dict[str, Tensor]:\n    d = {\"a\": (]\n    return d\n",
		"class Net(Module):\n  def forward(self: __torch__.pkg.Net) -> Dict[str, Tensor]:\n    ops.prim.RaiseException(\"no\")\n",
		"class Net(Module):\n  def forward(self: __torch__.pkg.Net) -> Dict[str, Tensor]:\n    return (self).forward()\n",
		"class Net(Module):\n  def forward(self, x, : , ) -> Dict[str, Tensor]:\n  if:\n    else\n  elif x:\n",
		strings.Repeat("(", 10000),
	} {
		got := dictKeysOf(t, map[string]string{"__torch__/pkg.py": code})
		for _, d := range got {
			for _, v := range d.Values {
				if v.Complete && len(v.Keys) > 0 {
					t.Errorf("%q: %+v", code, got)
				}
			}
		}
	}
}

// The code of torchvision 0.14's scripted Mask R-CNN and Keypoint R-CNN
// (testdata/*_code.pt: the archives internal/zoo/zoo.py writes, cut to
// the first 4 KiB of data.pkl and the code under
// torchvision/models/detection, without the backbone's and the anchor
// generator's): each image's dict holds boxes, labels and scores, which
// roi_heads appends, and the masks or keypoints it sets on each; the losses
// are the submodules' training losses, all optional.
func TestReadDictKeysTorchvision(t *testing.T) {
	t.Parallel()
	losses := func(head string) ValueKeys {
		return ValueKeys{Keys: []ReturnKey{{"loss_classifier", false}, {"loss_box_reg", false}, {head, false}, {"loss_objectness", false}, {"loss_rpn_box_reg", false}}, Complete: true}
	}
	for file, want := range map[string][]ValueKeys{
		"maskrcnn_code.pt":     {losses("loss_mask"), {Keys: []ReturnKey{{"boxes", true}, {"labels", true}, {"scores", true}, {"masks", true}}, Complete: true}},
		"keypointrcnn_code.pt": {losses("loss_keypoint"), {Keys: []ReturnKey{{"boxes", true}, {"labels", true}, {"scores", true}, {"keypoints", true}, {"keypoints_scores", true}}, Complete: true}},
	} {
		data, err := os.ReadFile(filepath.Join("testdata", file))
		if err != nil {
			t.Fatal(err)
		}
		got := ReadDictKeys(bytes.NewReader(data), int64(len(data)))
		if d := cmp.Diff(map[string]DictKeys{"forward": {Values: want}}, got); d != "" {
			t.Errorf("%s (-want +got):\n%s", file, d)
		}
	}
}
