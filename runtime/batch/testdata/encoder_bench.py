"""The Python peer of BenchmarkTorchEncoder (runtime/batch/torch_bench_test.go).

Runs the same loop as the Go benchmark over the same TorchScript file with
Debian's torch: items are per-item tensors, each batch is stacked, run
through the module under inference mode and split back into per-item rows.

It serves passes on request so that the Go benchmark can interleave them
with its own: after warming up it prints "ready THREADS", then for every
line read from stdin runs one pass over all items and prints its time in
nanoseconds. It exits at end of input.

usage: /usr/bin/python3 encoder_bench.py MODEL.pt ITEMS DIM MAX_BATCH
"""
import sys
import time

import torch


def main():
    path, n_items, dim, max_batch = sys.argv[1], *map(int, sys.argv[2:5])
    torch.manual_seed(0)
    module = torch.jit.load(path, map_location="cpu").eval()
    items = list(torch.randn(n_items, dim).unbind(0))

    def one_pass():
        outs = []
        with torch.inference_mode():
            for lo in range(0, n_items, max_batch):
                x = torch.stack(items[lo:lo + max_batch])
                outs.extend(module(x).unbind(0))
        return outs

    for _ in range(3):  # warm up the profiling executor
        one_pass()
    print("ready", torch.get_num_threads(), flush=True)
    for _ in sys.stdin:
        t0 = time.perf_counter_ns()
        one_pass()
        print(time.perf_counter_ns() - t0, flush=True)


if __name__ == "__main__":
    main()
