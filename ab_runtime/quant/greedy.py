"""Greedy tokens of a quantized checkpoint's reference forward: what a serving engine's greedy answer
to the same prompt must equal (the serving stage's acceptance of a quantized model).

    python -m ab_runtime.quant.greedy --model DIR --quantized DIR --prompts JSON --new-tokens N

`--prompts` is a JSON list of token-id lists; each is continued alone (no padding). Prints one line
`GREEDY=[[...], ...]`; exit 2 when the checkpoint is refused (ab_runtime.quant.evaluate's rule).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch

from .checkpoint import CheckpointError
from .evaluate import greedy_tokens
from .formats import read_quantized
from .reference import build_reference_model


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, required=True, help="the float model's directory")
    parser.add_argument("--quantized", type=Path, required=True, help="the checkpoint's directory")
    parser.add_argument("--prompts", required=True, help="a JSON list of token-id lists")
    parser.add_argument("--new-tokens", type=int, required=True)
    args = parser.parse_args(argv)
    try:
        ckpt = read_quantized(args.quantized)
        problems = ckpt.problems()
    except CheckpointError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if problems:
        print(f"error: {args.quantized}: refused: {problems[0]}", file=sys.stderr)
        return 2
    model = build_reference_model(args.model, ckpt)
    tokens = [
        greedy_tokens(model, torch.tensor([prompt]), args.new_tokens)[0].tolist() for prompt in json.loads(args.prompts)
    ]
    print("GREEDY=" + json.dumps(tokens))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
