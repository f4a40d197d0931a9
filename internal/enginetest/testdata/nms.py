"""Writes a tiny TorchScript module that calls torchvision's custom op
torchvision::nms, with an input and the output PyTorch gives for it, for
the op library tests (enginetest.BuildNMS): /usr/bin/python3 nms.py DIR

DIR/nms.pt is the module, DIR/boxes.npy and DIR/scores.npy the input and
DIR/out.npy forward's output (one thread).
"""
import os
import sys

import numpy as np
import torch
import torchvision  # noqa: F401 (registers torchvision::nms)


class NMS(torch.nn.Module):
    def forward(self, boxes: torch.Tensor, scores: torch.Tensor, iou: float = 0.5) -> torch.Tensor:
        keep = torch.ops.torchvision.nms(boxes, scores, iou)
        return boxes.index_select(0, keep) * scores.index_select(0, keep).unsqueeze(1)


def main():
    out = sys.argv[1]
    torch.set_num_threads(1)
    g = torch.Generator().manual_seed(0)
    xy = torch.rand(64, 2, generator=g) * 100
    wh = torch.rand(64, 2, generator=g) * 30 + 1
    boxes = torch.cat([xy, xy + wh], dim=1)
    scores = torch.rand(64, generator=g)
    m = torch.jit.script(NMS())
    m.save(os.path.join(out, "nms.pt"))
    np.save(os.path.join(out, "boxes.npy"), boxes.numpy())
    np.save(os.path.join(out, "scores.npy"), scores.numpy())
    np.save(os.path.join(out, "out.npy"), m(boxes, scores).numpy())


if __name__ == "__main__":
    main()
