#!/usr/bin/env python3
"""Training suite: tokens/s of one process vs DDP(2) vs FSDP2(2) on CPU, with the baseline contract.

Per strategy: tokens/s of the job, its scaling efficiency (tokens/s at N processes over N times one
process's) and the largest loss difference from the single process (the loss agreement).

Trains one demo model (tiny-llama unless told) on the bundled corpus three ways with the same
global batch, through the real launcher (`torchrun --standalone --nproc_per_node 2`, gloo), in the
shared CPU torch test environment: per strategy the median tokens/s and step time (first step
left out: it warms the allocator), the largest per-step loss difference from the single process,
and the baseline contract (target vs CPU float32 reference) of the same configuration in bf16
autocast. On a 2-core host two processes share the cores with everything else: DDP / FSDP2 are
about correctness here, not speed.

  uv run python bench/training_suite.py [--model tiny-llama] [--steps 12] [--seq-len 64] [--batch 8]
      [--out bench_training.json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.support.torch_env import torch_env_python  # noqa: E402

CORPUS = REPO / "training" / "corpus" / "tiny_stories.jsonl"
STRATEGIES = (("single", 1), ("ddp", 2), ("fsdp2", 2))


def run(python: Path, root: Path, name: str, command: str, nproc: int, config: dict[str, Any]) -> tuple[Path, float]:
    """Run one training command; returns its output directory and wall seconds."""
    path = root / f"{name}.json"
    path.write_text(json.dumps(config))
    out = root / name
    launcher = (
        [str(python), "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", str(nproc)]
        if nproc > 1
        else [str(python)]
    )
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
    start = time.monotonic()
    proc = subprocess.run(
        [*launcher, "-m", "ab_runtime.train.run", command, "--config", str(path), "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=900,
        env=env,
        cwd=REPO,
    )
    if proc.returncode != 0:
        sys.exit(
            f"error: {name} ({command}) exited {proc.returncode}: {(proc.stderr or proc.stdout).strip().splitlines()[-1:]}"
        )
    return out, time.monotonic() - start


def steps_of(out: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines() if line.strip()]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="tiny-llama", help="a folder of demo_models/")
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument("--seq-len", type=int, default=64)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--out", type=Path, help="write the figures as JSON here")
    args = parser.parse_args(argv)
    model_dir = REPO / "demo_models" / args.model
    if not (model_dir / "config.json").is_file():
        print(f"error: no demo model {args.model!r} under demo_models/", file=sys.stderr)
        return 2
    python = torch_env_python()
    base = {
        "model_dir": str(model_dir),
        "corpus": str(CORPUS),
        "steps": args.steps,
        "seq_len": args.seq_len,
        "batch": args.batch,
        "checkpoint_every": 0,
    }
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="training-suite-") as tmp:
        root = Path(tmp)
        single_losses: list[float] = []
        for strategy, nproc in STRATEGIES:
            out, wall = run(python, root, strategy, "train", nproc, {**base, "strategy": strategy})
            steps = steps_of(out)
            losses = [s["loss"] for s in steps]
            single_losses = single_losses or losses
            rows.append(
                {
                    "strategy": strategy,
                    "processes": nproc,
                    "wall_s": round(wall, 1),
                    "tokens_per_s": statistics.median(s["tokens_per_s"] for s in steps[1:]),
                    "step_time_s": statistics.median(s["step_time_s"] for s in steps[1:]),
                    "first_loss": losses[0],
                    "final_loss": losses[-1],
                    "max_loss_diff_vs_single": max(abs(a - b) for a, b in zip(losses, single_losses, strict=True)),
                }
            )
            # scaling efficiency: the job's tokens/s per process over one process's (1.0: linear)
            rows[-1]["scaling_efficiency"] = rows[-1]["tokens_per_s"] / (nproc * rows[0]["tokens_per_s"])
        out, wall = run(
            python, root, "contract", "contract", 1, {**base, "precision": "bf16-autocast", "steps": min(args.steps, 8)}
        )
        contract = json.loads((out / "contract.json").read_text())
    print(
        f"{args.model}: global batch {args.batch} x {args.seq_len} tokens, {args.steps} steps, load {os.getloadavg()[0]:.1f}"
    )
    print(
        f"{'strategy':<8} {'procs':>5} {'tok/s':>9} {'scaling':>8} {'step ms':>8} {'loss first->final':>18} "
        f"{'max |dloss|':>12}"
    )
    for row in rows:
        print(
            f"{row['strategy']:<8} {row['processes']:>5} {row['tokens_per_s']:>9.0f} {row['scaling_efficiency']:>8.2f} "
            f"{row['step_time_s'] * 1e3:>8.1f} {row['first_loss']:>8.4f}->{row['final_loss']:<8.4f} "
            f"{row['max_loss_diff_vs_single']:>12.2e}"
        )
    verdict = contract["verdict"]
    print(
        f"baseline contract ({contract['contract']}, bf16 autocast vs CPU fp32, {contract['steps']} steps, {wall:.0f} s): "
        f"{'PASSED' if verdict['passed'] else 'FAILED'}"
    )
    for check in verdict["checks"]:
        figures = {k: v for k, v in check.items() if k not in ("name", "passed", "floored") and isinstance(v, float)}
        print(
            f"  {'ok  ' if check['passed'] else 'FAIL'} {check['name']:<16} "
            + " ".join(f"{k}={v:.3g}" for k, v in figures.items())
        )
    if args.out:
        args.out.write_text(json.dumps({"model": args.model, "rows": rows, "contract": verdict}, indent=1) + "\n")
    matched = all(row["max_loss_diff_vs_single"] < 1e-5 for row in rows)
    return 0 if matched and verdict["passed"] else 1


if __name__ == "__main__":
    sys.exit(main())
