"""Exports the zoo: torchvision 0.14 models with random weights.

usage: zoo.py OUT MODEL...

For each MODEL (a name in MODELS) writes OUT/MODEL/: MODEL.pt (the model in
evaluation mode, torch.jit.script'ed, or traced for those in TRACED),
in_<ARG>[_<i>|_<KEY>].npy (the fixed input of each forward argument; a
List[Tensor] or Tuple[Tensor, ...] argument as one file per item, a
Dict[str, Tensor] one per key), out<PATH>.npy, one per tensor of PyTorch's output on that input with
one thread, PATH naming where the tensor sits in the result (a tuple
position — of the leaves, where a nested tuple's elements count as the
outer one's —, a dict key, a list index, each after a "."), and root.txt, the
kind of the result (tensor, tuple, list or dict). A model that does not
script gets OUT/MODEL/error.txt instead. Nothing is downloaded:
weights=None and weights_backbone=None.
"""

import os
import sys
from typing import Dict, Optional, Tuple

import numpy as np
import torch
import torchvision
from torchvision import models as M

torch.set_num_threads(1)

# Detection models resize each image to min_size..max_size inside forward;
# small sizes keep them fast (constructor keywords, not manifest edits).
SMALL = dict(min_size=128, max_size=160)


def img(*shape):
    return torch.rand(*shape)


def two_images():
    return [[img(3, 96, 128), img(3, 80, 80)]]


class TupleEncoder(torch.nn.Module):
    """A transformer-like encoder whose forward returns (last hidden state,
    pooled): traced, the everyday tuple."""

    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(8, 8)

    def forward(self, x):
        h = torch.tanh(self.proj(x))
        return h, h.mean(dim=1)


class NestedTuple(torch.nn.Module):
    """A scripted encoder returning (hidden, (pooled, attention)), the
    attention Optional (None here): a nested tuple."""

    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> Tuple[torch.Tensor, Tuple[torch.Tensor, Optional[torch.Tensor]]]:
        h = torch.tanh(self.proj(x))
        attention: Optional[torch.Tensor] = None
        return h, (h.mean(dim=1), attention)


class OptionalInput(torch.nn.Module):
    """A head with an Optional[Tensor] argument (None: no mask) and a
    float with a default, returning a dict."""

    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(8, 4)

    def forward(self, x: torch.Tensor, mask: Optional[torch.Tensor] = None, scale: float = 1.0) -> Dict[str, torch.Tensor]:
        h = self.proj(x) * scale
        if mask is not None:
            h = h * mask
        return {"logits": h, "probs": torch.softmax(h, dim=-1)}


class DictInput(torch.nn.Module):
    """A head whose features come in a Dict[str, Tensor]."""

    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(8, 4)

    def forward(self, features: Dict[str, torch.Tensor]) -> torch.Tensor:
        return self.proj(features["a"] + features["b"])


class TupleInput(torch.nn.Module):
    """A head whose two inputs come in a Tuple[Tensor, Tensor]."""

    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(8, 4)

    def forward(self, pair: Tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
        a, b = pair
        return self.proj(a * b)


# Built with torch.jit.trace on the inputs instead of torch.jit.script.
TRACED = {"traced_tuple"}

# name -> (constructor, forward's leading positional arguments: tensors,
# lists or tuples of tensors, dicts of tensors)
MODELS = {
    # classification
    "resnet18": (lambda: M.resnet18(weights=None), lambda: [img(1, 3, 64, 64)]),
    "mobilenet_v2": (lambda: M.mobilenet_v2(weights=None), lambda: [img(1, 3, 64, 64)]),
    "mobilenet_v3_small": (lambda: M.mobilenet_v3_small(weights=None), lambda: [img(1, 3, 64, 64)]),
    "efficientnet_b0": (lambda: M.efficientnet_b0(weights=None), lambda: [img(1, 3, 64, 64)]),
    "regnet_y_400mf": (lambda: M.regnet_y_400mf(weights=None), lambda: [img(1, 3, 64, 64)]),
    "shufflenet_v2_x0_5": (lambda: M.shufflenet_v2_x0_5(weights=None), lambda: [img(1, 3, 64, 64)]),
    "squeezenet1_0": (lambda: M.squeezenet1_0(weights=None), lambda: [img(1, 3, 64, 64)]),
    "mnasnet0_5": (lambda: M.mnasnet0_5(weights=None), lambda: [img(1, 3, 64, 64)]),
    "densenet121": (lambda: M.densenet121(weights=None), lambda: [img(1, 3, 64, 64)]),
    "convnext_tiny": (lambda: M.convnext_tiny(weights=None), lambda: [img(1, 3, 64, 64)]),
    "vit_b_16": (lambda: M.vit_b_16(weights=None, image_size=32), lambda: [img(1, 3, 32, 32)]),
    "swin_t": (lambda: M.swin_t(weights=None), lambda: [img(1, 3, 64, 64)]),
    # scripted, these return a NamedTuple (logits, Optional aux logits)
    "googlenet": (lambda: M.googlenet(weights=None, aux_logits=False, init_weights=True), lambda: [img(1, 3, 64, 64)]),
    "inception_v3": (lambda: M.inception_v3(weights=None, aux_logits=False, init_weights=True), lambda: [img(1, 3, 80, 80)]),
    # segmentation
    "lraspp_mobilenet_v3_large": (
        lambda: M.segmentation.lraspp_mobilenet_v3_large(weights=None, weights_backbone=None),
        lambda: [img(1, 3, 64, 64)]),
    "fcn_resnet50": (
        lambda: M.segmentation.fcn_resnet50(weights=None, weights_backbone=None),
        lambda: [img(1, 3, 64, 64)]),
    "deeplabv3_mobilenet_v3_large": (
        lambda: M.segmentation.deeplabv3_mobilenet_v3_large(weights=None, weights_backbone=None),
        lambda: [img(1, 3, 64, 64)]),
    # detection
    "ssdlite320_mobilenet_v3_large": (
        lambda: M.detection.ssdlite320_mobilenet_v3_large(weights=None, weights_backbone=None), two_images),
    "ssd300_vgg16": (
        lambda: M.detection.ssd300_vgg16(weights=None, weights_backbone=None), two_images),
    "fasterrcnn_mobilenet_v3_large_320_fpn": (
        lambda: M.detection.fasterrcnn_mobilenet_v3_large_320_fpn(weights=None, weights_backbone=None), two_images),
    "retinanet_resnet50_fpn": (
        lambda: M.detection.retinanet_resnet50_fpn(weights=None, weights_backbone=None, **SMALL), two_images),
    "fcos_resnet50_fpn": (
        lambda: M.detection.fcos_resnet50_fpn(weights=None, weights_backbone=None, **SMALL), two_images),
    "maskrcnn_resnet50_fpn": (
        lambda: M.detection.maskrcnn_resnet50_fpn(weights=None, weights_backbone=None, **SMALL), two_images),
    "keypointrcnn_resnet50_fpn": (
        lambda: M.detection.keypointrcnn_resnet50_fpn(weights=None, weights_backbone=None, **SMALL), two_images),
    # video
    "r3d_18": (lambda: M.video.r3d_18(weights=None), lambda: [img(1, 3, 4, 32, 32)]),
    "r2plus1d_18": (lambda: M.video.r2plus1d_18(weights=None), lambda: [img(1, 3, 4, 32, 32)]),
    # optical flow
    "raft_small": (
        lambda: M.optical_flow.raft_small(weights=None),
        lambda: [img(1, 3, 128, 128), img(1, 3, 128, 128)]),
    # not torchvision: what the issue names besides it
    "traced_tuple": (TupleEncoder, lambda: [torch.randn(2, 5, 8)]),
    "nested_tuple": (NestedTuple, lambda: [torch.randn(2, 5, 8)]),
    "optional_input": (OptionalInput, lambda: [torch.randn(2, 8), (torch.rand(2, 4) > 0.5).float()]),
    "dict_input": (DictInput, lambda: [{"a": torch.randn(2, 8), "b": torch.randn(2, 8)}]),
    "tuple_input": (TupleInput, lambda: [(torch.randn(2, 8), torch.randn(2, 8))]),
}


def flatten(value, path, out):
    if isinstance(value, torch.Tensor):
        out[path] = value
    elif isinstance(value, (tuple, list)):
        for i, v in enumerate(value):
            flatten(v, "%s.%d" % (path, i), out)
    elif isinstance(value, dict):
        for k, v in value.items():
            flatten(v, "%s.%s" % (path, k), out)
    elif value is not None:
        raise TypeError("%s: %r" % (path, type(value)))


def tuple_leaves(value, leaves):
    """The elements of a returned tuple that are artifacts, as wfgen
    numbers them (contract.TupleLeaves): a nested tuple holding a tensor
    is replaced by its own elements, depth first."""
    for e in value:
        if isinstance(e, tuple) and has_tensor(e):
            tuple_leaves(e, leaves)
        else:
            leaves.append(e)
    return leaves


def has_tensor(value):
    if isinstance(value, torch.Tensor):
        return True
    if isinstance(value, (tuple, list)):
        return any(has_tensor(v) for v in value)
    if isinstance(value, dict):
        return any(has_tensor(v) for v in value.values())
    return False


def root_kind(value):
    if isinstance(value, torch.Tensor):
        return "tensor"
    if isinstance(value, tuple):
        return "tuple"
    if isinstance(value, list):
        return "list"
    if isinstance(value, dict):
        return "dict"
    return type(value).__name__


def export(out, name):
    build, inputs = MODELS[name]
    d = os.path.join(out, name)
    os.makedirs(d, exist_ok=True)
    torch.manual_seed(0)
    model = build().eval()
    args = inputs()
    try:
        if name in TRACED:
            scripted = torch.jit.trace(model, tuple(args))
        else:
            scripted = torch.jit.script(model)
    except Exception as e:
        with open(os.path.join(d, "error.txt"), "w") as f:
            f.write(str(e).strip().splitlines()[0] + "\n")
        return
    path = os.path.join(d, name + ".pt")
    scripted.save(path)
    scripted = torch.jit.load(path)  # what the Go side loads
    # forward's schema names the arguments (its first is self)
    names = [a.name for a in scripted.forward.schema.arguments[1:]]
    for arg, v in zip(names, args):
        if isinstance(v, (list, tuple)):
            for i, x in enumerate(v):
                np.save(os.path.join(d, "in_%s_%d.npy" % (arg, i)), x.numpy())
        elif isinstance(v, dict):
            for k, x in v.items():
                np.save(os.path.join(d, "in_%s_%s.npy" % (arg, k)), x.numpy())
        else:
            np.save(os.path.join(d, "in_%s.npy" % arg), v.numpy())
    with torch.no_grad():
        result = scripted(*args)
    flat = {}
    if isinstance(result, tuple):
        result = tuple(tuple_leaves(result, []))
    flatten(result, "out", flat)
    for p, t in flat.items():
        np.save(os.path.join(d, p + ".npy"), t.contiguous().numpy())
    with open(os.path.join(d, "root.txt"), "w") as f:
        f.write(root_kind(result) + "\n")


def main():
    out = sys.argv[1]
    names = sys.argv[2:] or list(MODELS)
    for name in names:
        export(out, name)


if __name__ == "__main__":
    main()
