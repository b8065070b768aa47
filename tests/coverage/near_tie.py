"""Route flips constructed on a real MoE benchmark's outputs, judged by the real comparator.

`python near_tie.py RUNTIME_PARENT OUTPUTS.pt` (torch env) loads the outputs file an accuracy run
wrote (float32 target and reference, router logits and routing decisions of every layer) and
prints one JSON object of compare_outputs results:
- "near_tie": the reference router's closest token is made a near-tie (gap 1e-7 x scale), the
  target's router has the two experts the other way round and routes the token to the other
  expert, with the logits perturbed as a flip would;
- "clear": the same flip of a token whose reference gap is the largest (no tie at all).
"""

from __future__ import annotations

import json
import sys

import torch

sys.path.insert(0, sys.argv[1])

from ab_runtime.comparator import Thresholds, compare_outputs

saved = torch.load(sys.argv[2], map_location="cpu", weights_only=True)
reference = saved["reference"]
k = reference["routing.0"].shape[-1]


def flipped(pick: str) -> tuple[dict, dict]:
    """(target, reference) with one token of layer 0 routed to its (k+1)-th expert instead of its k-th."""
    ref = {n: v.clone() for n, v in reference.items()}
    tgt = {n: v.clone() for n, v in reference.items()}
    logits = ref["router_logits.0"].reshape(-1, ref["router_logits.0"].shape[-1])
    top = logits.topk(k + 1, dim=-1)
    gaps = top.values[:, k - 1] - top.values[:, k]
    token = int(gaps.argmin() if pick == "near_tie" else gaps.argmax())
    kth, other = int(top.indices[token, k - 1]), int(top.indices[token, k])
    if pick == "near_tie":  # a near-tie in the router: the target's rounding puts the other expert ahead
        gap = 1e-7 * float(logits.abs().max())
        logits[token, other] = logits[token, kth] - gap
        target_logits = logits.clone()
        target_logits[token, other] = logits[token, kth] + gap
        tgt["router_logits.0"] = target_logits.reshape(ref["router_logits.0"].shape)
    routes = tgt["routing.0"].reshape(-1, k)
    chosen = [e for e in routes[token].tolist() if e != kth] + [other]
    routes[token] = torch.tensor(sorted(chosen))
    tgt["logits"] = tgt["logits"] + 0.05 * tgt["logits"].abs().max() * torch.sin(
        torch.arange(tgt["logits"].numel()).float()
    ).reshape(tgt["logits"].shape)
    return tgt, ref


out = {}
for case in ("near_tie", "clear"):
    target, ref = flipped(case)
    out[case] = compare_outputs(target, ref, Thresholds(family="causal_lm"), "float32")
print(json.dumps(out))
