"""Parity fixture for runtime/torch: scripts a torchvision classifier with
random weights (fixed seed, eval mode), saves it and a reference input/output.

Usage: /usr/bin/python3 parity.py OUT_DIR [MODEL]
Writes OUT_DIR/model.pt, input.bin, output.bin (raw little-endian float32)
and meta.json (shapes, model, torch version). MODEL defaults to
mobilenet_v3_small; resnet18 works too.
"""
import json
import os
import sys

import torch
import torchvision


def main():
    out = sys.argv[1]
    name = sys.argv[2] if len(sys.argv) > 2 else "mobilenet_v3_small"
    torch.manual_seed(0)
    torch.set_num_threads(1)
    model = getattr(torchvision.models, name)(weights=None, num_classes=1000).eval()
    scripted = torch.jit.script(model)
    x = torch.randn(2, 3, 224, 224, dtype=torch.float32)
    with torch.inference_mode():
        y = scripted(x)
    os.makedirs(out, exist_ok=True)
    scripted.save(os.path.join(out, "model.pt"))
    x.contiguous().numpy().astype("<f4").tofile(os.path.join(out, "input.bin"))
    y.contiguous().numpy().astype("<f4").tofile(os.path.join(out, "output.bin"))
    with open(os.path.join(out, "meta.json"), "w") as f:
        json.dump({"model": name, "input_shape": list(x.shape), "output_shape": list(y.shape),
                   "torch": torch.__version__, "torchvision": torchvision.__version__}, f)


if __name__ == "__main__":
    main()
