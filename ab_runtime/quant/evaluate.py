"""Accuracy of a quantized checkpoint by execution: the float model and the checkpoint's reference
forward on the same token ids and texts, figures judged by the scheme's standard.

    python -m ab_runtime.quant.evaluate --model DIR --quantized DIR [--texts FILE] [--json]

Exit 0 when the figures meet the standard, 1 when they do not, 2 when the checkpoint cannot be
read or disagrees with its description (a refusal: nothing is computed from it).
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import time
from pathlib import Path
from typing import Any

import torch

from .checkpoint import CheckpointError
from .formats import read_quantized
from .reference import build_reference_model
from .standard import judge

DEFAULT_SEED = 1234


def logit_figures(reference: torch.Tensor, quantized: torch.Tensor) -> dict[str, float]:
    """Per-token comparison of two [tokens, vocab] logit tables."""
    cosine = torch.nn.functional.cosine_similarity(reference, quantized, dim=-1)
    scale = reference.abs().max().clamp_min(torch.finfo(torch.float32).tiny)
    return {
        "cosine_min": float(cosine.min()),
        "cosine_mean": float(cosine.mean()),
        "max_abs_err_scaled": float((reference - quantized).abs().max() / scale),
        "top1_agreement": float((reference.argmax(-1) == quantized.argmax(-1)).float().mean()),
    }


def perplexity(model: torch.nn.Module, ids: torch.Tensor) -> float:
    with torch.no_grad():
        return float(torch.exp(model(ids, labels=ids).loss))


def greedy_tokens(model: torch.nn.Module, prompt: torch.Tensor, new_tokens: int) -> torch.Tensor:
    """Greedy continuation without a cache: the same arithmetic at every step for both models."""
    ids = prompt
    with torch.no_grad():
        for _ in range(new_tokens):
            nxt = model(ids, use_cache=False).logits[:, -1].argmax(-1, keepdim=True)
            ids = torch.cat([ids, nxt], dim=1)
    return ids[:, prompt.shape[1] :]


def evaluate(
    model_dir: Path, quant_dir: Path, *, batch: int = 4, seq: int = 64, new_tokens: int = 16
) -> dict[str, Any]:
    import transformers

    ckpt = read_quantized(quant_dir)
    started = time.perf_counter()
    reference = transformers.AutoModelForCausalLM.from_pretrained(str(model_dir), dtype=torch.float32).eval()
    quantized = build_reference_model(model_dir, ckpt)
    vocab = int(reference.config.vocab_size)
    generator = torch.Generator().manual_seed(DEFAULT_SEED)
    ids = torch.randint(3, vocab, (batch, seq), generator=generator)
    with torch.no_grad():
        ref_logits = reference(ids, use_cache=False).logits.flatten(0, 1)
        q_logits = quantized(ids, use_cache=False).logits.flatten(0, 1)
    figures = logit_figures(ref_logits, q_logits)
    ppl_ref, ppl_q = perplexity(reference, ids), perplexity(quantized, ids)
    figures["perplexity_reference"] = ppl_ref
    figures["perplexity_quantized"] = ppl_q
    figures["perplexity_rel_delta"] = (ppl_q - ppl_ref) / ppl_ref
    prompt = ids[:, :8]
    figures["greedy_agreement"] = float(
        (greedy_tokens(reference, prompt, new_tokens) == greedy_tokens(quantized, prompt, new_tokens)).float().mean()
    )
    figures["weight_bytes_quantized"] = float(ckpt.weight_bytes())
    figures["weight_bytes_reference"] = float(sum(p.numel() * p.element_size() for p in reference.parameters()))
    return {
        "scheme": ckpt.quant_type,
        "inputs": {"seed": DEFAULT_SEED, "batch": batch, "seq": seq, "greedy_new_tokens": new_tokens},
        "figures": figures,
        "verdict": judge(ckpt.quant_type, figures),
        "seconds": time.perf_counter() - started,
        # this process's peak resident memory (Linux: ru_maxrss in KiB): both models and the batch
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, required=True, help="the float model's directory")
    parser.add_argument(
        "--quantized",
        type=Path,
        required=True,
        help="the checkpoint's directory (msModelSlim ascendv1 or compressed-tensors)",
    )
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    try:
        problems = read_quantized(args.quantized).problems()
    except CheckpointError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if problems:
        print(
            f"error: {args.quantized}: refused, {len(problems)} inconsistencies; first: {problems[0]}", file=sys.stderr
        )
        return 2
    result = evaluate(args.model, args.quantized)
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        verdict = result["verdict"]
        print(f"{result['scheme']}: {'PASSED' if verdict['passed'] else 'FAILED'} ({verdict['standard']})")
        for name, rule in verdict["rules"].items():
            print(
                f"  {name:22} {rule['value']:.6g} {rule['op']} {rule['bound']:.6g}  {'ok' if rule['passed'] else 'FAIL'}"
            )
    return 0 if result["verdict"]["passed"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
