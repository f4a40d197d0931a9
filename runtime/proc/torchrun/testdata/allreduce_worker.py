"""Test worker for runtime/proc/torchrun: joins the gloo process group that
torchrun set up, all-reduces (rank + 1) and reports the result as one JSON
line (a single write, so lines from the two workers never interleave)."""

import json
import os

import torch
import torch.distributed as dist


def main() -> None:
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    world = dist.get_world_size()
    t = torch.tensor([float(rank + 1)])
    dist.all_reduce(t)
    line = json.dumps(
        {
            "worker": "python",
            "rank": rank,
            "world_size": world,
            "local_rank": int(os.environ["LOCAL_RANK"]),
            "sum": t.item(),
            "master_addr": os.environ["MASTER_ADDR"],
        }
    )
    os.write(1, (line + "\n").encode())
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
