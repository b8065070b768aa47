"""The training command line behind a package's train.py (also what torchrun starts per rank).

    python -m ab_runtime.train.run train --config train.json --out DIR [--resume]
    python -m ab_runtime.train.run contract --config train.json --out DIR
    python -m ab_runtime.train.run profile --config train.json --out DIR
    python -m ab_runtime.train.run passes --config contract.json --out DIR [--candidates compile,fused_adamw]

`train` trains cfg.steps global steps (resuming from the newest good checkpoint with --resume),
evaluates the held-out split before and after, and writes metrics.jsonl (one line per step),
evaluation.json and train_result.json. `contract` trains the target and the CPU float32 reference
K = cfg.steps steps from the same weights, data order and seeds and writes contract.json: both
logs, the per-parameter gradient cosines of the first step, the checkpoint round trip and the
verdict of the framework's table (contract.py). `profile` writes profile.json and its trace
(profile.py: where a steady-state step's time goes, FLOPs per token); `passes` tries training
optimization passes (passes.py) and writes passes.json. All end with the RESULT line; a guard's stop is
exit 1 with its diagnosis (stopped.json).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from contextlib import nullcontext
from dataclasses import replace
from pathlib import Path
from typing import Any

import torch

from ..device import select_device
from ..errors import RuntimeDiagnosis, SpecError, UnsupportedModel
from ..fileops import write_text_atomic
from ..phases import phase
from ..progress import Progress
from ..result import Result, run_main
from . import contract as contract_table
from .checkpoint import latest_good_checkpoint
from .config import BF16_WEIGHTS, TRAINING_PASSES, TrainConfig
from .corpus import CorpusError
from .distributed import close_distributed, exit_rank, under_torchrun
from .guards import TrainingStopped
from .harness import Trainer, digest_parameters, metrics_log
from .passes import PASSES_FILE, run_passes
from .profile import run_profile

EVAL_BEFORE = "evaluation_before.json"
TRAIN_LOSS_TAIL = 5  # the train loss the held-out gap is measured against: mean of the last steps


def _write_json(path: Path, value: Any) -> None:
    write_text_atomic(path, json.dumps(value, indent=1, sort_keys=True) + "\n")


def progress_line(figures: dict[str, Any], steps: int, started: float, first_step: int) -> str:
    """`step 12/40 loss 3.21 grad 0.84 lr 1e-03 1534 tok/s ETA 9s` (ETA from the mean step so far),
    with `out of memory: micro-batch 2` on a step the ladder retried."""
    done = figures["step"] - first_step
    eta = (time.monotonic() - started) / done * (steps - figures["step"]) if done else math.nan
    ladder = f" out of memory: micro-batch {figures['micro_batch']}" if figures["oom_fallbacks"] else ""
    return (
        f"step {figures['step']}/{steps} loss {figures['loss']:.4f} grad {figures['grad_norm']:.3f} "
        f"lr {figures['lr']:.1e} {figures['tokens_per_s'] or 0:.0f} tok/s ETA {eta:.0f}s{ladder}"
    )


def train(cfg: TrainConfig, out: Path, resume: bool) -> Result:
    out.mkdir(parents=True, exist_ok=True)
    trainer = Trainer(cfg, out)
    resumed_from = None
    if resume and (checkpoint := latest_good_checkpoint(out)) is not None:
        trainer.load_checkpoint(checkpoint)
        resumed_from = checkpoint.name
    lead = trainer.rank == 0
    before_path = out / EVAL_BEFORE
    if before_path.exists() and resumed_from:
        before = json.loads(before_path.read_text())
    else:
        before = trainer.evaluate()
        if lead:
            _write_json(before_path, before)
    first_step, started = trainer.step_index, time.monotonic()
    what = f"training (resumed after step {first_step})" if first_step else "training"
    with (
        metrics_log(out / "metrics.jsonl", trainer.step_index) if lead else nullcontext() as log,
        Progress(what, total=cfg.steps - first_step) as progress,
    ):
        while trainer.step_index < cfg.steps:
            figures = trainer.step()
            progress.advance(note=f"loss {figures['loss']:.4f}")
            if log is not None:
                log.write(json.dumps(figures, sort_keys=True) + "\n")
                log.flush()
                print(progress_line(figures, cfg.steps, started, first_step), flush=True)
            # every checkpoint_every steps and at the last step (the gate reloads the final weights)
            if cfg.checkpoint_every and (
                trainer.step_index % cfg.checkpoint_every == 0 or trainer.step_index == cfg.steps
            ):
                trainer.save_checkpoint()
    trainer.beat("evaluate")
    after = trainer.evaluate()
    tail = trainer.losses[-TRAIN_LOSS_TAIL:]
    evaluation = {
        "before": before,
        "after": after,
        "verdict": contract_table.evaluation_verdict(before["loss"], after["loss"], sum(tail) / len(tail)),
    }
    result: Result = {
        "ok": True,
        "error": None,
        "steps": trainer.step_index,
        "paradigm": trainer.paradigm.name,
        "method": cfg.method,
        "strategy": trainer.strategy,
        "strategy_reason": trainer.strategy_reason,
        "device_map": trainer.device_map,
        "world": trainer.world,
        "device": trainer.device.as_dict(),
        "precision": trainer.precision,
        "precision_reason": trainer.precision_reason,
        "optimizer": trainer.optimizer_reason,
        "adapted": trainer.adapted,
        "adapted_reason": trainer.adapted_reason,
        "passes": list(cfg.passes),
        "resumed_from": resumed_from,
        "micro_batch": trainer.micro_batch,
        "oom_fallbacks": trainer.oom_fallbacks,
        "first_loss": trainer.losses[0],
        "final_loss": trainer.losses[-1],
        "loss_decreased": trainer.losses[-1] < trainer.losses[0],
        "evaluation": evaluation,
        "data_digest": trainer.data.digest,
        "parameters_digest": digest_parameters(trainer.model),
        "checkpoint": (latest_good_checkpoint(out) or Path("")).name or None,
    }
    if lead:
        _write_json(out / "evaluation.json", evaluation)
        _write_json(out / "train_result.json", result)
    return result


def _run_log(trainer: Trainer, steps: int, keep_first_grads: bool, what: str) -> dict[str, Any]:
    """Train `steps` steps and return the contract's log of the run."""
    start = digest_parameters(trainer.model)
    figures: list[dict[str, Any]] = []
    with Progress(what, total=steps) as progress:
        for index in range(steps):
            figures.append(trainer.step(keep_grads=keep_first_grads and index == 0))
            progress.advance(note=f"loss {figures[-1]['loss']:.4f}")
    return {
        "losses": [f["loss"] for f in figures],
        "grad_norms": [f["grad_norm"] for f in figures],
        "initial_digest": start,
        "params_changed": digest_parameters(trainer.model) != start,
        "optimizer_state": trainer.optimizer_has_state(),
        "device": trainer.device.kind,
        "precision": trainer.precision,
    }


def grad_cosines(target: dict[str, torch.Tensor], reference: dict[str, torch.Tensor]) -> dict[str, dict[str, Any]]:
    """Per-parameter cosine of the first step's gradients, floored for near-zero gradients."""
    largest = max((float(g.norm()) for g in reference.values()), default=0.0)
    floor = contract_table.GRAD_FLOOR * largest
    return {
        name: contract_table.floored_cosine(
            float((target[name].double() * grad.double()).sum()),
            float(target[name].double().norm()),
            float(grad.double().norm()),
            floor,
        )
        for name, grad in reference.items()
        if name in target
    }


def run_contract(cfg: TrainConfig, out: Path) -> Result:
    out.mkdir(parents=True, exist_ok=True)
    single = replace(cfg, strategy="single", checkpoint_every=0, keep_last=1)
    reference = Trainer(
        replace(single, device="cpu", precision="fp32", bf16_weights_above=None),
        out / "reference",
        device=select_device("cpu"),
    )
    reference_start_bf16 = digest_parameters(reference.model, torch.bfloat16)
    reference_log = _run_log(reference, cfg.steps, True, "baseline contract (reference, CPU float32)")
    target = Trainer(single, out / "target")
    target_log = _run_log(
        target, cfg.steps, True, f"baseline contract (target, {target.device.kind} {target.precision})"
    )
    # bfloat16 weights (the size rule) start from the reference's initial weights rounded to bfloat16
    target_log["same_initial_weights"] = target_log["initial_digest"] == (
        reference_start_bf16 if target.precision == BF16_WEIGHTS else reference_log["initial_digest"]
    )
    target_log["grad_cosines"] = grad_cosines(target.last_grads, reference.last_grads)
    # Checkpoint round trip: the step after a save, once straight on and once from the reloaded checkpoint.
    with Progress("baseline contract (checkpoint round trip)", total=2) as progress:
        checkpoint = target.save_checkpoint()
        straight = target.step()
        progress.advance()
        straight_digest = digest_parameters(target.model)
        reloaded = Trainer(single, out / "target")
        reloaded.load_checkpoint(checkpoint)
        again = reloaded.step()
        progress.advance()
    target_log["resume_identical"] = straight["loss"] == again["loss"] and straight_digest == digest_parameters(
        reloaded.model
    )
    target_log["resume"] = {"checkpoint": checkpoint.name, "loss": straight["loss"], "reloaded_loss": again["loss"]}
    verdict = contract_table.verdict(target_log, reference_log)
    record = {
        "contract": contract_table.CONTRACT_NAME,
        "steps": cfg.steps,
        "target": target_log,
        "reference": reference_log,
        "verdict": verdict,
    }
    _write_json(out / "contract.json", record)
    for check in verdict["checks"]:
        print(f"{'ok  ' if check['passed'] else 'FAIL'} {check['name']}", flush=True)
    return {
        "ok": verdict["passed"],
        "error": None if verdict["passed"] else "baseline contract failed",
        "verdict": verdict,
        "contract_path": str(out / "contract.json"),
    }


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("command", choices=("train", "contract", "profile", "passes"))
    parser.add_argument("--config", type=Path, required=True, help="train.json")
    parser.add_argument("--out", type=Path, required=True, help="the run's output directory")
    parser.add_argument("--resume", action="store_true", help="continue from the newest good checkpoint under --out")
    parser.add_argument(
        "--candidates", default=",".join(TRAINING_PASSES), help="passes: the passes to try, comma-separated"
    )
    parser.add_argument("--file", default=PASSES_FILE, help="passes: the record's file name in --out")
    parser.add_argument(
        "--judge-steps", type=int, default=0, help="passes: steps judged in lockstep (default: the config's)"
    )
    return parser.parse_args(argv)


def _stopped(exc: BaseException, result: Result) -> None:
    if isinstance(exc, TrainingStopped):
        result["diagnosis"] = exc.diagnosis


def quiet_followers() -> None:
    """Under torchrun only rank 0 prints: one progress stream and one RESULT line per job (two
    ranks printing at once can splice their RESULT lines into one unreadable line)."""
    if int(os.environ.get("RANK", "0")) > 0:
        sys.stdout = open(os.devnull, "w")  # the process's stdout until it exits


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    quiet_followers()

    def body() -> Result:
        cfg = TrainConfig.load(args.config)
        if args.command == "contract":
            with phase("contract"):
                return run_contract(cfg, args.out)
        if args.command == "profile":
            with phase("profile"):
                return run_profile(cfg, args.out)
        if args.command == "passes":
            candidates = [c for c in args.candidates.split(",") if c]
            if unknown := sorted(set(candidates) - set(TRAINING_PASSES)):
                raise SpecError(f"unknown training pass(es) {', '.join(unknown)} (known: {', '.join(TRAINING_PASSES)})")
            judged = replace(cfg, steps=args.judge_steps) if args.judge_steps > 0 else cfg
            with phase("pass_search"):
                return run_passes(judged, args.out, candidates, args.file)
        try:
            with phase("training"):
                return train(cfg, args.out, args.resume)
        except TrainingStopped as exc:
            args.out.mkdir(parents=True, exist_ok=True)
            _write_json(args.out / "stopped.json", exc.diagnosis)
            raise

    code = run_main(
        body,
        exit_code=lambda result: 0 if result.get("ok") else 1,
        failures=(RuntimeDiagnosis,),
        bad_input=(SpecError, CorpusError, UnsupportedModel),
        on_failure=_stopped,
    )
    close_distributed(finished=code == 0)
    return code


if __name__ == "__main__":
    status = main()
    if under_torchrun():
        exit_rank(status)
    sys.exit(status)
