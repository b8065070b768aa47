"""The decompositions the gap report proposes (ascendbridge/operators/gaps.py DECOMPOSITIONS), as
code, each held to the operator acceptance contract before anyone relies on it.

A gap with remedy `decomposition` says "this op runs on the release as these ops": that is a
replacement like any other, so each one here is the op written with exactly the ops the report
names, judged by `acceptance.run_contract` against the op itself in float64 on the CPU, with the
op in the sample's dtype as the baseline. The keys equal DECOMPOSITIONS' (a test keeps them so).

    python -m ab_runtime.ops.decompositions      (one JSON line: every decomposition's verdict)
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from . import acceptance
from .acceptance import Shapes


def _attention_reference(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """softmax(q k^T / sqrt(d)) v with ATen's own ops: the flash kernel's math (float64, CPU)."""
    scores = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(q.shape[-1])
    return torch.matmul(torch.softmax(scores, dim=-1), v)


def _attention_by_sdpa(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.scaled_dot_product_attention(q, k, v)


def _norm_by_parts(x: torch.Tensor) -> torch.Tensor:
    """linalg_vector_norm(x, 2, dim=-1) as pow.Tensor_Scalar, sum.dim_IntList and sqrt, accumulated
    in float32 as the op does for half types, the result in the input's dtype."""
    wide = x.float() if x.dtype in (torch.float16, torch.bfloat16) else x
    return torch.sqrt(torch.sum(torch.pow(wide, 2), dim=[-1])).to(x.dtype)


def _norm_op(x: torch.Tensor) -> torch.Tensor:
    return torch.linalg.vector_norm(x, 2, dim=-1)


@dataclass(frozen=True)
class Decomposition:
    """One proposed decomposition: the op as the listed ops, the op itself, the shapes to judge."""

    candidate: Callable[..., torch.Tensor]
    op: Callable[..., torch.Tensor]
    cases: list[Shapes]

    @staticmethod
    def same_in_every_dtype(fn: Callable[..., torch.Tensor]) -> Callable[[torch.dtype], Callable[..., torch.Tensor]]:
        """run_contract's per-dtype factory for a function that follows its inputs' dtype."""
        return lambda dtype: fn


HEADS = ((2, 2, 7, 16),) * 3, ((1, 4, 1, 32), (1, 4, 9, 32), (1, 4, 9, 32))  # prefill; one decode step
DECOMPOSITIONS: dict[str, Decomposition] = {
    "_scaled_dot_product_flash_attention": Decomposition(_attention_by_sdpa, _attention_reference, list(HEADS)),
    "linalg_vector_norm": Decomposition(_norm_by_parts, _norm_op, acceptance.hidden_cases(64)),
}


def contracts(dtypes: tuple[str, ...] = ("float32", "bfloat16", "float16")) -> list[dict[str, Any]]:
    """Every decomposition's verdict, in `dtypes`."""
    return [
        acceptance.run_contract(
            name,
            d.same_in_every_dtype(d.candidate),
            d.op,
            d.cases,
            list(dtypes),
            baseline_for=d.same_in_every_dtype(d.op),
        )
        for name, d in DECOMPOSITIONS.items()
    ]


def main(argv: list[str]) -> int:
    return acceptance.print_verdicts(contracts())


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
