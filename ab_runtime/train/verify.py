"""Re-verify a training run's evidence: what the training stage's gate runs with the framework's copy.

    python -m ab_runtime.train.verify --config train.json --out DIR

Recomputes, never trusts: the baseline-contract verdict from the two saved logs (contract.json)
with the framework's table; the evaluation verdict from the saved before / after losses and the
step log; every checkpoint's digests; the step log against the losses each checkpoint recorded
(an edited metrics.jsonl disagrees with them) and the out-of-memory fallbacks of the log with the
result's; then reloads a checkpoint, re-runs the step after it at the micro-batch the log records
and compares the loss bit for bit with the log, and reloads the final checkpoint to compare
the weights' digest and the held-out loss with the run's result. Exit 0 when every check holds,
1 otherwise (RESULT line: {"ok", "checks": [{name, passed, detail}]}). A run of several ranks is
verified under the same torchrun line it trained with.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

from ..errors import RuntimeDiagnosis, SpecError
from ..result import Result, run_main
from . import contract as contract_table
from .checkpoint import checkpoint_dirs, verify_checkpoint
from .config import TrainConfig
from .corpus import CorpusError
from .harness import Trainer, digest_parameters
from .run import EVAL_BEFORE, TRAIN_LOSS_TAIL, quiet_followers


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise SpecError(f"{path}: unreadable evidence ({exc})") from None


def step_log(out: Path) -> list[dict[str, Any]]:
    path = out / "metrics.jsonl"
    if not path.is_file():
        raise SpecError(f"{path}: no step log")
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def verify(cfg: TrainConfig, out: Path) -> Result:
    checks: list[dict[str, Any]] = []

    def check(name: str, passed: bool, detail: str = "") -> None:
        checks.append({"name": name, "passed": bool(passed), "detail": detail})

    steps = step_log(out)
    losses = [float(s["loss"]) for s in steps]
    check(
        "step_log",
        [s["step"] for s in steps] == list(range(1, cfg.steps + 1)),
        f"{len(steps)} steps logged of {cfg.steps}",
    )
    if (out / "contract.json").is_file():
        record = _read_json(out / "contract.json")
        recomputed = contract_table.verdict(record["target"], record["reference"])
        check(
            "contract_recomputed",
            recomputed == record["verdict"],
            "the recorded verdict equals the recomputation"
            if recomputed == record["verdict"]
            else "the recorded contract verdict differs from its recomputation from the logs",
        )
        check(
            "contract_passed",
            recomputed["passed"],
            ", ".join(c["name"] for c in recomputed["checks"] if not c["passed"]) or "every rule holds",
        )
    result = _read_json(out / "train_result.json")
    evaluation = _read_json(out / "evaluation.json")
    before = _read_json(out / EVAL_BEFORE)
    tail = losses[-TRAIN_LOSS_TAIL:]
    again = contract_table.evaluation_verdict(before["loss"], evaluation["after"]["loss"], sum(tail) / len(tail))
    check(
        "evaluation_recomputed",
        again == evaluation["verdict"] and evaluation["before"] == before,
        f"verdict {again['verdict']} ({again['rule']})",
    )
    check("result_matches_log", result["first_loss"] == losses[0] and result["final_loss"] == losses[-1])
    logged_fallbacks = sum(int(s.get("oom_fallbacks", 0)) for s in steps)
    recorded_fallbacks = len(result.get("oom_fallbacks", []))
    check(
        "oom_fallbacks_logged",
        logged_fallbacks == recorded_fallbacks,
        f"{logged_fallbacks} out-of-memory fallback(s) in the step log, {recorded_fallbacks} in the result",
    )
    kept = checkpoint_dirs(out)
    broken = [problem for path in kept if (problem := verify_checkpoint(path))]
    check("checkpoint_digests", bool(kept) and not broken, "; ".join(broken) or f"{len(kept)} checkpoint(s) verified")
    for path in kept:
        meta = _read_json(path / "meta.json")
        recorded = [float(v) for v in meta["losses"]]
        check(
            f"log_matches_{path.name}",
            recorded == losses[: len(recorded)],
            "the step log agrees with the losses the checkpoint recorded"
            if recorded == losses[: len(recorded)]
            else "the step log differs from the losses the checkpoint recorded (an edited log)",
        )
    resumable = [path for path in kept if int(path.name.split("-")[1]) < len(steps)]
    if resumable:
        trainer = Trainer(cfg, out / "verify-rerun")
        trainer.load_checkpoint(resumable[-1])
        logged = steps[trainer.step_index]
        trainer.micro_batch = int(logged.get("micro_batch", trainer.micro_batch))  # where the ladder had it
        figures = trainer.step()
        check(
            "rerun_step",
            figures["loss"] == logged["loss"] and figures["grad_norm"] == logged["grad_norm"],
            f"step {trainer.step_index} from {resumable[-1].name}: loss {figures['loss']!r} vs logged {logged['loss']!r}",
        )
    else:
        check("rerun_step", False, "no checkpoint has a logged step after it to re-run")
    final = [path for path in kept if int(path.name.split("-")[1]) == len(steps)]
    check(
        "final_checkpoint",
        bool(final),
        "the last step's checkpoint holds every logged loss and the final weights"
        if final
        else "no checkpoint of the last step: the steps after the last checkpoint cannot be checked",
    )
    if final:
        trainer = Trainer(cfg, out / "verify-final")
        trainer.load_checkpoint(final[-1])
        digest = digest_parameters(trainer.model)
        held_out = trainer.evaluate()["loss"]
        check("final_weights", digest == result["parameters_digest"], f"{final[-1].name} weights digest")
        check(
            "final_evaluation",
            held_out == evaluation["after"]["loss"],
            f"held-out loss {held_out!r} vs recorded {evaluation['after']['loss']!r}",
        )
    passed = all(c["passed"] for c in checks)
    for item in checks:
        print(f"{'ok  ' if item['passed'] else 'FAIL'} {item['name']}: {item['detail']}", flush=True)
    return {"ok": passed, "error": None if passed else "training evidence does not verify", "checks": checks}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True, help="the run's output directory")
    args = parser.parse_args(argv)
    quiet_followers()
    # Injected faults belong to the run under test, not to its re-execution.
    return run_main(
        lambda: verify(replace(TrainConfig.load(args.config), fault={}), args.out),
        exit_code=lambda result: 0 if result.get("ok") else 1,
        failures=(RuntimeDiagnosis,),
        bad_input=(SpecError, CorpusError),
    )


if __name__ == "__main__":
    sys.exit(main())
