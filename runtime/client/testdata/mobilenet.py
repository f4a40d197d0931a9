"""Writes torchvision's mobilenet_v3_small as a TorchScript archive (random
weights from a fixed seed, eval mode) for runtime/client's batch-invariance
tests: /usr/bin/python3 mobilenet.py OUT.pt
"""
import sys

import torch
import torchvision


def main():
    torch.manual_seed(0)
    model = torchvision.models.mobilenet_v3_small(weights=None, num_classes=1000).eval()
    torch.jit.script(model).save(sys.argv[1])


if __name__ == "__main__":
    main()
