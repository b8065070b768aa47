#!/usr/bin/env python3
"""How often the optimization perf gate's rule passes a forged claim, and an honest one, when the
host's load makes its paired re-measurement noisy: a Monte Carlo run of the gate's own rule.

    uv run bench/perf_gate_noise.py [--trials 20000] [--seed 1] [--json]

Each trial feeds `ab_runtime.optimize.quick.gate_verdict` one pair speedup at a time, exactly as
the gate's re-measurement does (optimization/inner/reverify.py: judged after every pair from the
fifth on, at most quick.GATE_MAX_PAIRS), until it decides. A pair speedup is the true speedup times
log-normal noise of spread `sigma` (the sides of a pair see the same load, so the noise is centred
on the truth; a busy host widens it). Rows:

- forged x2: a pass of no gain (true x1.0) claimed at x2 with the interval of a forgery of
  consistent samples (2.0..2.0). Its `passed` rate is the gate's false-pass rate; CI beside busy
  loops once read such pairs at 0.48..4.42 (sigma about 0.6-1.0).
- honest: a real gain claimed as the confirmation measured it (claim, low end of its interval).
  Its `failed` rate is honest evidence failed by noise; `inconclusive` sends the gate back for a
  later re-check, nothing is lost.

What it does not show: a host that favours one side of a pair systematically (not noise centred on
the truth). The pair interleaving (harness.paired) is what guards against that.
Exit 0; 2 on bad input.
"""

from __future__ import annotations

import json
import math
import random
import sys
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from ab_runtime import pairstats  # noqa: E402  (after the repository is on the path)
from ab_runtime.optimize import quick  # noqa: E402
from ascendbridge.cli_errors import EXIT_USAGE, OneLineParser, emit_error  # noqa: E402

# (name, true speedup, claimed, the claim's own interval low end, noise spreads)
SCENARIOS: tuple[tuple[str, float, float, float, tuple[float, ...]], ...] = (
    ("forged x2 on no gain", 1.0, 2.0, 2.0, (0.2, 0.4, 0.6, 1.0, 1.5, 2.0)),
    ("honest x1.4 (claim 1.4, from 1.1)", 1.4, 1.4, 1.1, (0.1, 0.2, 0.4)),
    ("honest x1.1 (claim 1.1, from 1.04)", 1.1, 1.1, 1.04, (0.05, 0.1, 0.2)),
    ("honest x3 (claim 3, from 2.8)", 3.0, 3.0, 2.8, (0.1, 0.2, 0.4)),
)


def one_gate(rng: random.Random, true: float, claimed: float, low: float, sigma: float) -> tuple[str, int]:
    """One gate's verdict on pairs drawn one at a time, and how many pairs it took."""
    pairs: list[float] = []
    while True:
        pairs.append(true * math.exp(rng.gauss(0.0, sigma)))
        verdict, _ = quick.gate_verdict(pairs, claimed, pairstats.DEFAULT_MIN_GAIN, claimed_low=low)
        if verdict != "continue":
            return verdict, len(pairs)


def rates(trials: int, seed: int, true: float, claimed: float, low: float, sigma: float) -> dict[str, float]:
    rng = random.Random(seed)
    counts = {"passed": 0, "failed": 0, "inconclusive": 0}
    taken = 0
    for _ in range(trials):
        verdict, n = one_gate(rng, true, claimed, low, sigma)
        counts[verdict] += 1
        taken += n
    return {**{k: v / trials for k, v in counts.items()}, "mean_pairs": taken / trials}


def main(argv: list[str] | None = None) -> int:
    parser = OneLineParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=20000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    if args.trials < 1:
        emit_error("--trials must be >= 1")
        return EXIT_USAGE
    rows = [
        {"scenario": name, "sigma": sigma, **rates(args.trials, args.seed, true, claimed, low, sigma)}
        for name, true, claimed, low, sigmas in SCENARIOS
        for sigma in sigmas
    ]
    print(json.dumps(rows, indent=2) if args.json else table(rows, args.trials, args.seed))
    return 0


def table(rows: list[dict[str, Any]], trials: int, seed: int) -> str:
    """The rows as a fixed-width table, one line a scenario and noise spread."""
    lines = [f"{'scenario':38} {'sigma':>5} {'passed':>7} {'failed':>7} {'inconcl.':>8} {'pairs':>5}"]
    lines += [
        f"{r['scenario']:38} {r['sigma']:5.2f} {r['passed']:7.3f} {r['failed']:7.3f} "
        f"{r['inconclusive']:8.3f} {r['mean_pairs']:5.1f}"
        for r in rows
    ]
    lines.append(f"({trials} gates a row, seed {seed}; rule: ab_runtime/optimize/quick.py gate_verdict)")
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
