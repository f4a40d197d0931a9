"""Python peer for runtime/torch's interleaved benchmark.

Usage: /usr/bin/python3 bench_server.py MODEL.pt THREADS ARG SHAPE...
Loads the TorchScript module (or, for MODEL.pt2, the AOTInductor package
with torch._inductor.aoti_load_package; TorchScript's CPU fusion off, as in
the Go engine), builds a float32 input of SHAPE (the same
values the Go benchmark uses: 0.001 * i), prints "ready", then for every line
"N" on stdin runs N calls of forward(x) (positional, the fastest Python call) under torch.inference_mode() and
prints the elapsed nanoseconds.
"""
import sys
import time

import torch


def main():
    path, threads, arg = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    shape = [int(s) for s in sys.argv[4:]]
    torch.set_num_threads(threads)
    if path.endswith(".pt2"):
        m = torch._inductor.aoti_load_package(path)
    else:
        torch._C._jit_override_can_fuse_on_cpu(False)
        m = torch.jit.load(path).eval()
    n = 1
    for d in shape:
        n *= d
    x = (torch.arange(n, dtype=torch.float32) * 0.001).reshape(shape)
    with torch.inference_mode():
        for _ in range(20):
            m(x)
    print("ready", flush=True)
    for line in sys.stdin:
        count = int(line)
        t0 = time.perf_counter_ns()
        with torch.inference_mode():
            for _ in range(count):
                m(x)
        print(time.perf_counter_ns() - t0, flush=True)


if __name__ == "__main__":
    main()
