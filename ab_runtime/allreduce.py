"""All-reduce bus bandwidth of this host's devices, for host acceptance (ab_runtime/host_acceptance.py).

One process per device (on a CPU host: ALLREDUCE_CPU_PROCESSES gloo processes), each on its own
card made current by the device layer's rank rule (`rank_device`), joined in a process group on
the device's backend (hccl / nccl / gloo, `DIST_BACKENDS`). Each message size is all-reduced
(sum) after a warm-up and timed REPEATS times; the caller reports it as bus bandwidth the way
nccl-tests define it: bytes / time x 2 (n - 1) / n (`bus_factor`), the traffic each link carries in
a ring, so the figure is comparable to the link's rated speed whatever the number of devices. Why here: a link down or a card on the
wrong PCIe switch shows up as a collective far below the others, before a job spends hours in it.
"""

from __future__ import annotations

import os
import socket
import time
from typing import Any

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from .device import DIST_BACKENDS, rank_device, visible_indices

MESSAGE_BYTES = (64 * 1024, 1024**2, 16 * 1024**2)  # latency-, middle- and bandwidth-bound sizes
ALLREDUCE_CPU_PROCESSES = 2
REPEATS = 10


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _device_count(kind: str) -> int:
    if kind == "cpu":
        return ALLREDUCE_CPU_PROCESSES
    return len(visible_indices(kind, os.environ, lambda: int(getattr(torch, kind).device_count())))


def _rank(rank: int, world: int, kind: str, port: int, out: Any) -> None:
    """One rank: make its card current, join the group, time every message size, report rank 0's seconds."""
    env = {**os.environ, "LOCAL_RANK": str(rank), "LOCAL_WORLD_SIZE": str(world)}
    device = rank_device(kind, visible_indices(kind, env, lambda: world), env)
    if device.index is not None:
        getattr(torch, kind).set_device(device.index)
    dist.init_process_group(device.backend, init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    try:
        rows = []
        for size in MESSAGE_BYTES:
            tensor = torch.ones(size // 4, device=device.torch_device)
            dist.all_reduce(tensor)  # warm-up: connections and buffers set up
            samples = []
            for _ in range(REPEATS):
                dist.barrier()
                start = time.perf_counter()
                dist.all_reduce(tensor)
                if kind != "cpu":
                    getattr(torch, kind).synchronize()
                samples.append(time.perf_counter() - start)
            rows.append({"bytes": size, "seconds": samples})
        if rank == 0:
            out.put(rows)
    finally:
        dist.destroy_process_group()


def bus_factor(world: int) -> float:
    """What each link of a ring carries per byte all-reduced: 2 (n - 1) / n (nccl-tests' bus bandwidth)."""
    return 2.0 * (world - 1) / world


def allreduce_seconds(kind: str) -> dict[str, Any]:
    """Rank 0's seconds per all-reduce, per message size, over this host's devices (`world` of them);
    n/a with a single device."""
    world = _device_count(kind)
    if world < 2:
        return {"na": f"n/a, one {kind} device"}
    queue = mp.get_context("spawn").SimpleQueue()
    mp.start_processes(_rank, args=(world, kind, _free_port(), queue), nprocs=world, start_method="spawn")
    return {"backend": DIST_BACKENDS[kind], "processes": world, "sizes": queue.get()}
