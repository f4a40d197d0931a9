"""Python peer for runtime/client's BenchmarkEmbedBatchInterleaved.

Usage: /usr/bin/python3 batch_peer.py MODEL.pt THREADS ITEMS LENGTH BATCH

Loads the tiny-encoder TorchScript file, builds ITEMS token sequences of
LENGTH int64 ids with the values the Go benchmark uses ((i*31 + j*7) % 1000),
prints "ready", then for every line on stdin runs the whole job once and
prints the elapsed nanoseconds:

  stack  batches of BATCH items stacked from per-item tensors
         (torch.stack), forward(tokens=..., normalize=True), the output
         split back into per-item tensors (unbind): what the Go client does.
  slice  the items pre-stacked into one [ITEMS, LENGTH] tensor; each batch
         is a slice of it, its output kept as one tensor: Python's fastest
         form of the job.

Everything runs under torch.inference_mode().
"""
import sys
import time

import torch


def main():
    path, threads, items, length, bsz = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
    torch.set_num_threads(threads)
    m = torch.jit.load(path).eval()
    ids = [[(i * 31 + j * 7) % 1000 for j in range(length)] for i in range(items)]
    per_item = [torch.tensor(row, dtype=torch.int64) for row in ids]
    stacked = torch.tensor(ids, dtype=torch.int64)

    def stack():
        out = []
        for i in range(0, items, bsz):
            batch = per_item[i:i + bsz]
            y = m(tokens=torch.stack(batch), normalize=True)
            out.extend(y.unbind(0))
        return out

    def slice_():
        out = []
        for i in range(0, items, bsz):
            out.append(m(tokens=stacked[i:i + bsz], normalize=True))
        return out

    jobs = {"stack": stack, "slice": slice_}
    with torch.inference_mode():
        stack()
        slice_()
    print("ready", flush=True)
    for line in sys.stdin:
        job = jobs[line.strip()]
        t0 = time.perf_counter_ns()
        with torch.inference_mode():
            job()
        print(time.perf_counter_ns() - t0, flush=True)


if __name__ == "__main__":
    main()
