"""Fast seeded initialisation for big dry runs.

CPU random fills run at tens of millions of values per second, and a dry run of a 70B config
still holds billions of values (its two embedding tables alone are 2.1e9). Inside this context,
tensor.normal_ / uniform_ on large contiguous tensors draw one seeded block with the real
distribution and tile it by copying, so the model's own init code (per-module std, ones for
norms) still decides every distribution, at memory speed. Dry-run values are never compared
against anything; the code path and shapes are what matter.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import torch

BLOCK = 1 << 22  # values drawn per tensor; the rest is tiled copies of them
PATCHED = ("normal_", "uniform_")


def _tiled(original: Callable[..., Any]) -> Callable[..., Any]:
    def fill(self: torch.Tensor, *args: Any, **kwargs: Any) -> torch.Tensor:
        if self.numel() <= BLOCK or not self.is_contiguous() or self.device.type == "meta":
            return original(self, *args, **kwargs)
        with torch.no_grad():
            flat = self.view(-1)
            original(flat[:BLOCK], *args, **kwargs)
            filled = BLOCK
            while filled < flat.numel():
                count = min(filled, flat.numel() - filled)
                flat[filled : filled + count].copy_(flat[:count])
                filled += count
        return self

    return fill


@contextmanager
def fast_random_init() -> Iterator[None]:
    originals = {name: getattr(torch.Tensor, name) for name in PATCHED}
    try:
        for name, original in originals.items():
            setattr(torch.Tensor, name, _tiled(original))
        yield
    finally:
        for name, original in originals.items():
            setattr(torch.Tensor, name, original)
