"""Distributed training: the torchrun job a Trainer joins, the collectives its step uses, and how
its model is wrapped (DDP, FSDP2) and its gradients synchronized.

One process is the degenerate job: every function here is then a no-op or the identity, so the
step loop is the same code for one process and for many.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from typing import NoReturn

import torch
import torch.distributed as dist
from torch import nn

from ..device import DIST_BACKENDS, DeviceChoice


def rank_and_world() -> tuple[int, int]:
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


def under_torchrun() -> bool:
    """Whether this process is one rank of a torchrun job of several (torchrun sets WORLD_SIZE)."""
    return int(os.environ.get("WORLD_SIZE", "1")) > 1


def init_distributed(choice: DeviceChoice) -> None:
    """Join the torchrun job (HCCL on an NPU, NCCL on CUDA, gloo on CPU) when WORLD_SIZE > 1; each rank's
    card is its LOCAL_RANK-th of the claim (ab_runtime.device.rank_device)."""
    if under_torchrun() and not dist.is_initialized():
        dist.init_process_group(DIST_BACKENDS[choice.kind])  # after select_device made the rank's card current


def barrier() -> None:
    if dist.is_initialized():
        dist.barrier()


def close_distributed(finished: bool) -> None:
    """Leave the torchrun job before the interpreter shuts down. A process that exits with its gloo
    group alive can abort (SIGABRT) when gloo's worker threads release Python-held tensors during
    interpreter finalization (pytorch/pytorch#179291); a finished run first waits for its peers so
    none tears down a connection another still reads."""
    if dist.is_initialized():
        if finished:
            dist.barrier()
        dist.destroy_process_group()


def exit_rank(code: int) -> NoReturn:
    """End a torchrun rank with `code` without interpreter finalization. destroy_process_group
    drops only c10d's references to the gloo group: FSDP2's device mesh and the sharded modules
    keep theirs, and its worker threads could still abort the process while Python tears down
    (SIGABRT, "terminate called without an active exception"; once in the CI runs of an FSDP2
    resume, after the results were written). Every file is closed by then; the streams are flushed."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def all_sum(value: torch.Tensor) -> torch.Tensor:
    """The sum over the ranks (the value itself in one process)."""
    if dist.is_initialized():
        value = value.clone()
        dist.all_reduce(value)
    return value


def full(value: torch.Tensor) -> torch.Tensor:
    """A DTensor's full value (FSDP2), any other tensor as is."""
    return value.full_tensor() if hasattr(value, "full_tensor") else value


def transformer_blocks(model: nn.Module) -> list[nn.Module]:
    """The repeated layers FSDP2 shards one by one: the items of each outermost ModuleList."""
    found: list[nn.Module] = []
    taken: list[str] = []
    for name, module in model.named_modules():
        if isinstance(module, nn.ModuleList) and not any(name.startswith(t + ".") for t in taken):
            taken.append(name)
            found.extend(module)
    return found


class DistributedPart:
    """The Trainer's distributed part: its model wrapped for the strategy, and the gradient sync."""

    strategy: str
    world: int
    model: nn.Module

    def _wrap(self, model: nn.Module) -> nn.Module:
        if self.strategy == "ddp" and self.world > 1:
            from torch.nn.parallel import DistributedDataParallel

            return DistributedDataParallel(model)
        if self.strategy == "fsdp2" and self.world > 1:
            from torch.distributed.fsdp import fully_shard

            for block in transformer_blocks(model):
                fully_shard(block)
            fully_shard(model)
        return model

    @property
    def core(self) -> nn.Module:
        """The model without its DDP wrapper."""
        return getattr(self.model, "module", self.model)

    @contextmanager
    def _sync_gradients(self, last: bool) -> Iterator[None]:
        """DDP all-reduces the gradients in the last micro-batch's backward only (the others
        accumulate locally); FSDP2 reduce-scatters in every backward, which sums the same."""
        with nullcontext() if last or not hasattr(self.model, "no_sync") else self.model.no_sync():
            yield
