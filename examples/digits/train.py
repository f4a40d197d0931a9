"""Train the digits model, or predict with it, the way a PyTorch user would.

The data are the 1,797 handwritten digits (8x8 pixels, values 0..16) that
Debian's python3-sklearn ships (sklearn.datasets.load_digits). Each picture is
stored as an 8-bit grey PNG with its values scaled to 0..255
(round(v * 255 / 16)); the model sees what torchvision makes of such a PNG:
ToTensor (v / 255) then Normalize(mean, std) -- the conversion
manifests/digits.yaml declares, which Go's runtime/pixels reproduces bit for
bit. The mean and std come from the manifest: the Go side (package
examples/digits) passes them.

    train:   /usr/bin/python3 train.py train --out DIR --mean M --std S
             writes DIR/checkpoints/digits.pt (TorchScript: forward(pixels)
             with pixels float32 [N, 1, 8, 8] returns {"logits": float32
             [N, 10], "label": int64 [N]}), DIR/test/NNNN.png (the held-out
             20 %, stratified) and DIR/test/labels.txt ("NNNN.png digit" per
             line), and prints the held-out accuracy as JSON.
    predict: /usr/bin/python3 train.py predict --model PT --images DIR --mean M --std S
             reads DIR/labels.txt and the PNGs it lists with PIL, runs the
             TorchScript model on them and prints {"predictions": [...],
             "logits": [[...], ...], "correct": n, "total": n} as JSON.

Training is deterministic: fixed seeds, one thread and
torch.use_deterministic_algorithms, so the same torch build writes the same
weights every time. It takes a few seconds on one CPU core.
"""

import argparse
import json
import os
import sys
import time
from typing import Dict

import numpy as np
import torch
from PIL import Image
from torch import nn
from torchvision import transforms

SEED = 14
EPOCHS = 12
BATCH = 32


class Digits(nn.Module):
    """A small CNN: two 3x3 convolutions, a 2x2 max pool, two linear layers."""

    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(),
            nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(),
            nn.MaxPool2d(2),
        )
        self.head = nn.Sequential(
            nn.Flatten(), nn.Linear(32 * 4 * 4, 64), nn.ReLU(), nn.Linear(64, 10),
        )

    def forward(self, pixels: torch.Tensor) -> Dict[str, torch.Tensor]:
        logits = self.head(self.features(pixels))
        return {"logits": logits, "label": logits.argmax(dim=1)}


def pictures():
    """The digits as uint8 [N, 8, 8] pictures (0..16 scaled to 0..255) and labels."""
    from sklearn.datasets import load_digits

    d = load_digits()
    px = np.round(d.images * 255.0 / 16.0).astype(np.uint8)
    return px, d.target.astype(np.int64)


def split(labels, frac=0.2):
    """A stratified, seeded split: per digit, the first frac of a shuffle is held out."""
    rng = np.random.default_rng(SEED)
    test = []
    for digit in range(10):
        idx = np.flatnonzero(labels == digit)
        rng.shuffle(idx)
        test.extend(idx[: int(round(len(idx) * frac))].tolist())
    test = np.array(sorted(test))
    train = np.setdiff1d(np.arange(len(labels)), test)
    return train, test


def to_input(px, mean, std):
    """What torchvision's ToTensor + Normalize make of uint8 [N, 8, 8] pictures."""
    x = torch.from_numpy(px).unsqueeze(1).to(torch.float32).div(255)
    return transforms.Normalize([mean], [std])(x)


def train(args):
    start = time.time()
    torch.manual_seed(SEED)
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    px, labels = pictures()
    tr, te = split(labels)
    x, y = to_input(px[tr], args.mean, args.std), torch.from_numpy(labels[tr])
    model = Digits()
    opt = torch.optim.Adam(model.parameters(), lr=2e-3)
    gen = torch.Generator().manual_seed(SEED)
    model.train()
    for _ in range(EPOCHS):
        order = torch.randperm(len(y), generator=gen)
        for i in range(0, len(y), BATCH):
            b = order[i : i + BATCH]
            opt.zero_grad()
            loss = nn.functional.cross_entropy(model(x[b])["logits"], y[b])
            loss.backward()
            opt.step()
    model.eval()
    trained = time.time() - start

    ckpt = os.path.join(args.out, "checkpoints", "digits.pt")
    test_dir = os.path.join(args.out, "test")
    os.makedirs(os.path.dirname(ckpt), exist_ok=True)
    os.makedirs(test_dir, exist_ok=True)
    scripted = torch.jit.script(model)
    tmp = ckpt + ".tmp"
    scripted.save(tmp)
    os.replace(tmp, ckpt)
    lines = []
    for i in te:
        name = "%04d.png" % i
        Image.fromarray(px[i], mode="L").save(os.path.join(test_dir, name))
        lines.append("%s %d\n" % (name, labels[i]))
    with open(os.path.join(test_dir, "labels.txt.tmp"), "w") as f:
        f.writelines(lines)
    os.replace(os.path.join(test_dir, "labels.txt.tmp"), os.path.join(test_dir, "labels.txt"))

    with torch.no_grad():
        pred = scripted(to_input(px[te], args.mean, args.std))["label"].numpy()
    correct = int((pred == labels[te]).sum())
    json.dump({"train": len(tr), "test": len(te), "correct": correct,
               "accuracy": correct / len(te), "seconds": round(trained, 2)}, sys.stdout)
    print()


def predict(args):
    torch.set_num_threads(1)
    model = torch.jit.load(args.model)
    model.eval()
    pre = transforms.Compose([transforms.ToTensor(), transforms.Normalize([args.mean], [args.std])])
    names, want = [], []
    with open(os.path.join(args.images, "labels.txt")) as f:
        for line in f:
            name, digit = line.split()
            names.append(name)
            want.append(int(digit))
    x = torch.stack([pre(Image.open(os.path.join(args.images, n)).convert("L")) for n in names])
    with torch.no_grad():
        out = model(x)
    pred = out["label"].tolist()
    correct = sum(int(p == w) for p, w in zip(pred, want))
    json.dump({"predictions": pred, "logits": out["logits"].tolist(), "correct": correct, "total": len(want)}, sys.stdout)
    print()


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    t = sub.add_parser("train")
    t.add_argument("--out", required=True)
    q = sub.add_parser("predict")
    q.add_argument("--model", required=True)
    q.add_argument("--images", required=True)
    for s in (t, q):
        s.add_argument("--mean", type=float, required=True)
        s.add_argument("--std", type=float, required=True)
    args = p.parse_args()
    {"train": train, "predict": predict}[args.cmd](args)


if __name__ == "__main__":
    main()
