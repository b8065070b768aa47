"""The operator acceptance contract on RMSNorm replacements, the npu_swaps and the gap report's
decompositions (prints one JSON).

    python acceptance_logic.py RUNTIME_PARENT
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable

sys.path.insert(0, sys.argv[1])

import torch
from transformers.models.llama.modeling_llama import LlamaRMSNorm

from ab_runtime.ops import acceptance, decompositions

HIDDEN = 64
EPS = 1e-6


def replaced_by(formula: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]) -> Callable[[torch.nn.Module], None]:
    def replace(module: torch.nn.Module) -> None:
        weight = module.weight
        module.forward = lambda x: formula(x.float(), weight.float()).to(x.dtype)

    return replace


def right(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + EPS) * w


def eps_outside(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:  # epsilon moved out of the square root
    return x / (x.pow(2).mean(-1, keepdim=True).sqrt() + EPS) * w


def eps_squared_inside(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:  # epsilon's scale changed inside it
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + EPS * EPS) * w


norm = LlamaRMSNorm(HIDDEN, eps=EPS)
torch.nn.init.normal_(norm.weight, 1.0, 0.1)
cases = [((2, 5, HIDDEN),), ((1, HIDDEN),)]
out = {
    name: acceptance.module_contract(name, norm, replaced_by(formula), cases, ["float32", "bfloat16"])
    for name, formula in (("right", right), ("eps_outside", eps_outside), ("eps_squared", eps_squared_inside))
}
out["few"] = acceptance.run_contract("few", lambda dtype: torch.neg, torch.neg, [((4,),)], ["float32"])
out["swaps"] = acceptance.swap_contracts()
out["decompositions"] = decompositions.contracts()
unscaled = decompositions.DECOMPOSITIONS["_scaled_dot_product_flash_attention"]  # the 1/sqrt(d) scale left out
out["unscaled_attention"] = acceptance.run_contract(
    "unscaled",
    lambda dtype: lambda q, k, v: torch.softmax(q @ k.transpose(-2, -1), -1) @ v,
    unscaled.op,
    unscaled.cases,
    ["float32"],
    baseline_for=lambda dtype: unscaled.op,
)
print(json.dumps(out, default=str))
