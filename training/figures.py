"""The training figures: what the stage proposes for the board and the gate recomputes, and the loss curve.

Every figure is derived from the saved evidence (train_result.json, metrics.jsonl, contract.json,
supervision.json), so the gate recomputes the same dictionary from the same files. The held-out
verdict is a number on the board: improved 1, flat 0, worse -1.
"""

from __future__ import annotations

import json
import shutil
import struct
from pathlib import Path
from statistics import median
from typing import Any

from ab_runtime import pairstats
from ab_runtime.train.contract import loss_verdict
from ab_runtime.train.flops import mfu
from ab_runtime.train.profile_table import reduce_trace
from ascendbridge.gatekit.summary import pyplot, save_figure
from training.events import read_scalars, write_scalars

LOSS_CURVE = "loss_curve.png"
EVENTS_DIR = "tensorboard"  # in the run directory: `tensorboard --logdir adaptations/NAME/train/run/tensorboard`
STEP_SCALARS = ("loss", "grad_norm", "lr", "tokens_per_s", "step_time_s", "peak_memory_bytes")
EVAL_SCALARS = ("loss", "perplexity", "masked_accuracy")
FIGURES_FILE = "figures.json"  # in the run directory: the figures the stage proposed
PROFILE_FILE = "profile.json"  # in the run directory: the profiled window (ab_runtime/train/profile.py)
PASSES_FILE = "passes.json"  # in the run directory: the training-pass search (ab_runtime/train/passes.py)
CONFIRM_FILE = "passes_confirm.json"  # its fresh-process confirmation of the kept passes
EVALUATION_FILE = "evaluation.json"  # in the run directory: the held-out loss before and after
PEAK_FILE = "peak.json"  # in the run directory: the host acceptance's measured GEMM TFLOP/s per dtype
VERDICT_VALUE = {"improved": 1.0, "flat": 0.0, "worse": -1.0}


def step_log(run: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines() if line.strip()]


def read_evaluation(run: Path) -> dict[str, Any]:
    """The run's held-out losses before and after training (evaluation.json); {} when it has none."""
    path = run / EVALUATION_FILE
    return json.loads(path.read_text()) if path.is_file() else {}


def _float32(value: Any) -> float:
    """A TensorBoard scalar is a float32: the value the event file holds."""
    return float(struct.unpack("f", struct.pack("f", float(value)))[0])


def event_scalars(run: Path) -> dict[str, list[tuple[int, float]]]:
    """{tag: [(step, value)]} the run's TensorBoard events hold, from the step log and evaluation.json:
    train/<figure> per step, eval/<figure> before (step 0) and after (the last step) training."""
    steps = step_log(run)
    scalars = {
        f"train/{key}": [(int(s["step"]), _float32(s[key])) for s in steps if s.get(key) is not None]
        for key in STEP_SCALARS
    }
    evaluation = read_evaluation(run)
    if evaluation and steps:
        for key in EVAL_SCALARS:
            if key in evaluation["before"] and key in evaluation["after"]:
                scalars[f"eval/{key}"] = [
                    (0, _float32(evaluation["before"][key])),
                    (int(steps[-1]["step"]), _float32(evaluation["after"][key])),
                ]
    return {tag: points for tag, points in scalars.items() if points}


def write_events(run: Path) -> Path:
    """The run's TensorBoard event file, written afresh into run/EVENTS_DIR from the saved logs
    (training/events.py: no tensorboard library on either side); step wall times are the log's."""
    directory = run / EVENTS_DIR
    shutil.rmtree(directory, ignore_errors=True)
    directory.mkdir(parents=True)
    times = {int(s["step"]): float(s.get("time") or 0.0) for s in step_log(run)}
    write_scalars(
        directory,
        (
            (tag, step, value, times.get(step, 0.0))
            for tag, points in event_scalars(run).items()
            for step, value in points
        ),
    )
    return directory


def read_events(directory: Path) -> dict[str, list[tuple[int, float]]]:
    """{tag: [(step, value)]} of the scalars in an event directory (ValueError for a malformed
    file); empty when there is no such directory."""
    return read_scalars(directory) if directory.is_dir() else {}


def read_profile(run: Path) -> dict[str, Any] | None:
    """The run's profile.json, or None when the profile did not run (it is optional evidence)."""
    path = run / PROFILE_FILE
    return json.loads(path.read_text()) if path.is_file() else None


def profile_problems(run: Path, profile: dict[str, Any] | None) -> list[str]:
    """The gate's check of the profile: its table is what its trace reduces to."""
    if profile is None:
        return []
    trace = json.loads((run / str(profile["trace"])).read_text())
    return (
        []
        if reduce_trace(trace) == profile["table"]
        else [f"{PROFILE_FILE}: the table is not what its trace reduces to"]
    )


def read_passes(run: Path) -> list[dict[str, Any]]:
    """The pass search's records, search then confirmation, as far as they ran."""
    return [json.loads((run / name).read_text()) for name in (PASSES_FILE, CONFIRM_FILE) if (run / name).is_file()]


def confirmed_passes(records: list[dict[str, Any]]) -> list[str]:
    """The passes both the search and its confirmation kept (none without a confirmation)."""
    if len(records) < 2:
        return []
    return [name for name in records[0]["kept"] if name in records[1]["kept"]]


def _decided(record: dict[str, Any]) -> str:
    """A candidate's verdict re-derived from its saved losses and timings."""
    losses = record["losses"]
    if not loss_verdict(losses["candidate"], losses["baseline"])["passed"]:
        return "refused"
    timing = record["timing"]
    width = timing["iters_per_block"]
    blocks = [
        [samples[i : i + width] for i in range(0, len(samples), width)]
        for samples in (timing["baseline_samples_ms"], timing["candidate_samples_ms"])
    ]
    again = pairstats.summarize_pairs(blocks[0], blocks[1], timing["warmup"]).as_dict()
    return "kept" if pairstats.gain_decision(again, "pass")[0] else "no_gain"


def passes_problems(records: list[dict[str, Any]], train: dict[str, Any]) -> list[str]:
    """The gate's check of the pass search: every verdict re-derived from its saved losses and
    pairs, and the run trained with exactly the passes both runs kept."""
    problems = [
        f"training pass {name}: recorded {record['verdict']}, its figures give {_decided(record)}"
        for search in records
        for name, record in search["candidates"].items()
        if _decided(record) != record["verdict"]
    ]
    if train.get("passes", []) != confirmed_passes(records):
        problems.append(
            f"the run trains with passes {train.get('passes', [])}, the search confirmed {confirmed_passes(records)}"
        )
    return problems


def passes_figures(records: list[dict[str, Any]]) -> dict[str, float]:
    """How many passes were tried and confirmed; each confirmed pass's speedup in its fresh run."""
    if not records:
        return {}
    confirmed = confirmed_passes(records)
    figures = {"passes_tried": float(len(records[0]["candidates"])), "passes_confirmed": float(len(confirmed))}
    for name in confirmed:
        figures[f"pass_{name}_speedup"] = float(records[1]["candidates"][name]["timing"]["speedup"])
    return figures


def write_peak(run: Path, judged: dict[str, Any]) -> None:
    """The host acceptance's measured GEMM figures (TFLOP/s per dtype), MFU's denominators."""
    gemm = {r["figure"]: r["measured"] for r in judged["rows"] if r["figure"].startswith("gemm_") and r["measured"]}
    (run / PEAK_FILE).write_text(json.dumps(gemm, indent=1, sort_keys=True) + "\n")


def read_peak(run: Path) -> dict[str, float]:
    path = run / PEAK_FILE
    return json.loads(path.read_text()) if path.is_file() else {}


def mfu_figures(peak: dict[str, float], precision: str, model_tflops: float | None) -> dict[str, float]:
    """MFU: the model TFLOP/s over the host's measured GEMM peak of the dtype the run computes in."""
    dtype = "gemm_float32" if precision == "fp32" else "gemm_bfloat16"
    if model_tflops is None or not peak.get(dtype):
        return {}
    return {"mfu": mfu(model_tflops * 1e12, 1.0, peak[dtype] * 1e12) or 0.0, "peak_tflops": peak[dtype]}


def profile_figures(profile: dict[str, Any] | None, tokens_per_s: float) -> dict[str, float]:
    """The profiled window's figures: the model FLOPs per token, the model TFLOP/s the run's median
    tokens/s means, and the shares of the step (compute, optimizer, data, communication, host)."""
    if not profile:
        return {}
    table = profile["table"]
    figures = {
        "flops_per_token": float(profile["flops_per_token"]),
        "model_tflops": float(profile["flops_per_token"]) * tokens_per_s / 1e12,
    }
    figures.update({f"profile_{part}_share": float(share) for part, share in table["shares"].items()})
    return figures


def training_figures(
    result: dict[str, Any],
    steps: list[dict[str, Any]],
    contract: dict[str, Any],
    supervision: dict[str, Any],
    profile: dict[str, Any] | None = None,
    passes: list[dict[str, Any]] | None = None,
    peak: dict[str, float] | None = None,
) -> dict[str, float]:
    evaluation = result["evaluation"]
    rates = [float(s["tokens_per_s"]) for s in steps if s.get("tokens_per_s")]
    figures = {
        "steps": float(len(steps)),
        "loss_first": float(steps[0]["loss"]),
        "loss_last": float(steps[-1]["loss"]),
        "eval_loss_before": float(evaluation["before"]["loss"]),
        "eval_loss_after": float(evaluation["after"]["loss"]),
        "eval_verdict": VERDICT_VALUE[evaluation["verdict"]["verdict"]],
        "eval_gap": float(evaluation["verdict"]["gap"] or 0.0),
        "contract_passed": 1.0 if contract.get("verdict", {}).get("passed") else 0.0,
        "tokens_per_s": median(rates) if rates else 0.0,
        "step_time_s": median(float(s["step_time_s"]) for s in steps),
        "peak_memory_bytes": float(max(int(s.get("peak_memory_bytes") or 0) for s in steps)),
        "hangs": float(supervision.get("hangs", 0)),
        "restarts": float(supervision.get("restarts", 0)),
        # the out-of-memory ladder, from the harness's result (ladder_problems: the step log must agree)
        "micro_batch": float(result["micro_batch"]),
        "oom_fallbacks": float(len(result["oom_fallbacks"])),
    }
    for key in ("perplexity", "masked_accuracy"):
        if key in evaluation["after"]:
            figures[f"eval_{key}_before"] = float(evaluation["before"][key])
            figures[f"eval_{key}_after"] = float(evaluation["after"][key])
    figures.update(profile_figures(profile, figures["tokens_per_s"]))
    figures.update(mfu_figures(peak or {}, str(result["precision"]), figures.get("model_tflops")))
    return {**figures, **passes_figures(passes or [])}


def ladder_problems(result: dict[str, Any], steps: list[dict[str, Any]]) -> list[str]:
    """Where the result's out-of-memory ladder (its final micro-batch, its fallbacks) and the step
    log's disagree: the last step ran at the result's micro-batch, and the steps' fallbacks add up
    to the result's list, step by step."""
    problems = []
    if int(steps[-1].get("micro_batch") or 0) != int(result["micro_batch"]):
        problems.append(
            f"micro-batch {result['micro_batch']} in train_result.json, {steps[-1].get('micro_batch')} "
            "at the last step of metrics.jsonl"
        )
    logged = {int(s["step"]): int(s.get("oom_fallbacks") or 0) for s in steps if s.get("oom_fallbacks")}
    recorded: dict[int, int] = {}
    for fallback in result["oom_fallbacks"]:
        recorded[int(fallback["step"])] = recorded.get(int(fallback["step"]), 0) + 1
    if logged != recorded:
        problems.append(f"out-of-memory fallbacks per step {recorded} in train_result.json, {logged} in metrics.jsonl")
    return problems


def draw(run_dir: Path, png: Path) -> Path:
    """Loss and gradient norm per step, with the held-out loss before and after."""
    steps = step_log(run_dir)
    evaluation = read_evaluation(run_dir)
    fig, (loss_ax, grad_ax) = pyplot().subplots(1, 2, figsize=(10, 3.6))
    x = [s["step"] for s in steps]
    loss_ax.plot(x, [s["loss"] for s in steps], label="train loss")
    if evaluation:
        loss_ax.scatter(
            [0, x[-1]],
            [evaluation["before"]["loss"], evaluation["after"]["loss"]],
            color="C3",
            zorder=3,
            label=f"held-out ({evaluation['verdict']['verdict']})",
        )
    loss_ax.set(xlabel="step", ylabel="loss", title="loss")
    loss_ax.legend()
    grad_ax.plot(x, [s["grad_norm"] for s in steps], color="C1")
    grad_ax.set(xlabel="step", ylabel="global gradient norm", title="gradient norm")
    return save_figure(fig, png)
