"""Accelerator check: demo models in system mode on a plain Python with torch (no uv, no network).

    python3 bench/accelerator_check.py --device cuda|cpu [--out DIR] [--models a,b,c]

Renders a few bundled demo models, makes each package's environment in system mode on THIS
interpreter (nothing is installed: torch and transformers must already be there), checks the
stack against the compatibility table, runs the demo's dry run, the benchmark (accuracy_run.py)
and the optimization's pass search (ab_runtime.optimize) on --device; then trains the causal LMs
among them as the training stage does (train.py rendered by training.render: the baseline contract
against CPU float32, a full and a LoRA run with checkpoints, and ab_runtime.train.verify, which
re-runs a step from a checkpoint bit for bit); and says whether this interpreter has the serving
engine (vLLM), which the check does not install. Writes one report (accelerator_check.json + .md).
Needs from the interpreter: torch, transformers, pydantic, pydantic-settings, sqlmodel, jinja2,
packaging, psutil, and the packages' own dependencies (safetensors, huggingface_hub, peft: system
mode names any that is missing). bench/accelerator_check.sh is the entry point with the 10-minute limit.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from ascendbridge.board.records import TrainingJob  # noqa: E402
from ascendbridge.config import TorchSource, torch_source  # noqa: E402
from ascendbridge.envmode import EnvChoice  # noqa: E402
from ascendbridge.package import uv_env  # noqa: E402
from ascendbridge.package.generator import render_adaptation  # noqa: E402
from ascendbridge.package.spec import AdaptationSpec, InputRecipe, ModelSource  # noqa: E402
from ascendbridge.stack_identity import describe  # noqa: E402
from benchmark.render import render_accuracy_run  # noqa: E402
from serving.steps import StepError, cuda_device  # noqa: E402
from training.figures import VERDICT_VALUE, step_log, training_figures  # noqa: E402
from training.render import CONTRACT_CONFIG, TRAIN_CONFIG, TRAIN_PY, render_package  # noqa: E402
from training.settings import TrainingSettings  # noqa: E402

DEFAULT_MODELS = ("tiny-bert", "tiny-llama", "tiny-vit")
TRAINED_FAMILY = "causal_lm"  # the models of this family among --models are also trained
TRAIN_STEPS = 20
CORPUS = REPO / "training" / "corpus" / "tiny_stories.jsonl"
RUN_TIMEOUT_S = 400.0
REPORT_RESERVE_S = 20.0  # kept back from --limit-s so the report is always written


class Deadline:
    """The whole check's time limit: every step gets what is left of it."""

    def __init__(self, limit_s: float) -> None:
        self.end = time.monotonic() + limit_s - REPORT_RESERVE_S

    def left(self) -> float:
        return max(1.0, min(RUN_TIMEOUT_S, self.end - time.monotonic()))

    def spent(self) -> bool:
        return time.monotonic() >= self.end


def demo_spec(name: str) -> AdaptationSpec:
    info = json.loads((REPO / "demo_models" / "manifest.json").read_text())["models"][name]
    model_dir = REPO / "demo_models" / name
    config = json.loads((model_dir / "config.json").read_text())
    has_weights = any(model_dir.glob("*.safetensors"))
    return AdaptationSpec(
        name=name,
        model=ModelSource(model_id=info["model_id"], source="local", path=str(model_dir), has_weights=has_weights),
        task_family=info["task_family"],
        model_class=info["architecture"],
        architecture=info["architecture"],
        model_type=config.get("model_type"),
        inputs=InputRecipe(seq_len=32),
    )


def _why(command: Any, result: dict[str, Any] | None) -> str:
    """One line: the run's own error, a timeout (the check's limit), or the last output line."""
    if command.timed_out:
        return f"stopped at the time limit after {command.duration_s:.0f} s"
    return str((result or {}).get("error") or f"exit {command.exit_code}: {command.tail(1)}")


def check_one(name: str, root: Path, device: str, source: TorchSource, deadline: Deadline) -> dict[str, Any]:
    started = time.monotonic()
    spec = demo_spec(name)
    directory = root / name
    render_adaptation(spec, directory, source)
    render_accuracy_run(spec, directory)
    row: dict[str, Any] = {"model": name, "device": device, "ok": False}
    sync = uv_env.sync(directory, uv_env.profile_for_device(device), env=EnvChoice("system", Path(sys.executable)))
    if not sync.ok:
        return {**row, "error": sync.tail(1)}
    row["stack"] = json.loads((directory / ".venv" / "ascendbridge-env.json").read_text())["stack"]
    demo = uv_env.run_demo(directory, device=device, timeout_s=deadline.left())
    if not demo.ok:
        return {**row, "error": f"dry run: {_why(demo.command, demo.result)}"}
    bench = uv_env.run_in_env(
        directory, ["accuracy_run.py", "--device", device, "--warmup", "3", "--iters", "20"], timeout_s=deadline.left()
    )
    result = uv_env.parse_result(bench.output)
    if not result or not result.get("ok"):
        return {**row, "error": f"benchmark: {_why(bench, result)}"}
    row["benchmark"] = {
        k: result.get(k)
        for k in ("dtype", "median_ms", "p90_ms", "samples_per_s", "verdict", "device_name", "reference_median_ms")
    }
    opt = uv_env.run_in_env(
        directory,
        ["-m", "ab_runtime.optimize", "--device", device, "--pairs", "5", "--iters", "5", "--warmup", "2"],
        timeout_s=deadline.left(),
    )
    found = uv_env.parse_result(opt.output)
    if opt.exit_code != 0 or not found or not found.get("ok"):
        return {**row, "error": f"optimization: {_why(opt, found)}"}
    notes = json.loads((directory / "optimization_notes.json").read_text())
    row["optimization"] = {
        "chosen": notes["chosen"],
        "speedup": notes["final"].get("speedup"),
        "outcome": notes["final"].get("outcome"),
        "passes_tried": len(notes.get("passes", [])),
    }
    return {**row, "ok": True, "duration_s": round(time.monotonic() - started, 1)}


def train_one(name: str, directory: Path, method: str, device: str, deadline: Deadline) -> dict[str, Any]:
    """One training run of a rendered, synced package as the training stage runs it (one process):
    the baseline contract, the run with checkpoints, then the framework's verification."""
    row: dict[str, Any] = {"model": name, "method": method, "device": device, "ok": False}
    # the section's own class: the settings layer's entry points need the project installed, which it is not here
    settings = TrainingSettings(ascendbridge_device=device, checkpoint_every=TRAIN_STEPS // 2)
    job = TrainingJob(data=str(CORPUS), method=method, steps=TRAIN_STEPS)
    render_package(directory, name, str(REPO / "demo_models" / name), job, settings)
    out = f"train/{method}"
    steps = [
        ("contract", [TRAIN_PY, "contract", "--config", CONTRACT_CONFIG, "--out", out]),
        ("train", [TRAIN_PY, "train", "--config", TRAIN_CONFIG, "--out", out]),
        ("verify", ["-m", "ab_runtime.train.verify", "--config", TRAIN_CONFIG, "--out", out]),
    ]
    for step, argv in steps:
        command = uv_env.run_in_env(directory, argv, timeout_s=deadline.left())
        result = uv_env.parse_result(command.output)
        if not command.ok or not result or not result.get("ok"):
            failing = [c["name"] for c in (result or {}).get("checks", []) if not c["passed"]]
            return {
                **row,
                "error": f"{step}: {_why(command, result)}" + (f" ({', '.join(failing)})" if failing else ""),
            }
    run = directory / out
    result = json.loads((run / "train_result.json").read_text())  # both written by the runs that passed above
    figures = training_figures(result, step_log(run), json.loads((run / "contract.json").read_text()), {})
    return {**row, "ok": True, "precision": result.get("precision"), "figures": figures}


def serving_row(device: str) -> dict[str, Any]:
    """The serving engine is not installed by the check (no network there): say whether it is here,
    and on CUDA the device profile the serving stage would plan on (serving.steps.cuda_device)."""
    row: dict[str, Any] = {"engine": "vllm", "installed": importlib.util.find_spec("vllm") is not None}
    if device == "cuda":
        try:
            profile = cuda_device(os.environ)
            row["plan_device"] = f"{profile.devices} x {profile.memory_bytes / 2**30:.1f} GiB"
        except StepError as exc:
            row["plan_device"] = f"error: {exc}"
    return row


MODEL_COLUMNS = "model|median ms|samples/s|accuracy|chosen passes|speedup|time".split("|")
TRAINING_COLUMNS = "trained|method|precision|contract|loss first -> last|held-out|tokens/s|step ms|peak MB".split("|")


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    """A markdown table; a row shorter than the header (a failure's) is padded with empty cells."""
    padded = [row + [""] * (len(header) - len(row)) for row in rows]
    return ["", *("| " + " | ".join(cells) + " |" for cells in (header, ["---"] * len(header), *padded))]


def _failed(r: dict[str, Any]) -> str:
    return f"failed: {r.get('error', '').replace('|', '/')}"


def _model_cells(r: dict[str, Any]) -> list[str]:
    if not r["ok"]:
        return [r["model"], _failed(r)]
    b, o = r["benchmark"], r["optimization"]
    return [
        r["model"],
        f"{b['median_ms']:.3f}",
        f"{b['samples_per_s']:.1f}",
        str(b["verdict"]),
        ", ".join(o["chosen"]) or "none",
        f"{o['speedup'] or 0:.2f}x ({o['outcome']})",
        f"{r['duration_s']} s",
    ]


def _training_cells(r: dict[str, Any]) -> list[str]:
    if not r["ok"]:
        return [r["model"], r["method"], _failed(r)]
    f = r["figures"]
    verdict = {value: name for name, value in VERDICT_VALUE.items()}[f["eval_verdict"]]
    return [
        r["model"],
        r["method"],
        str(r["precision"]),
        "passed" if f["contract_passed"] else "FAILED",
        f"{f['loss_first']:.4f} -> {f['loss_last']:.4f}",
        f"{verdict} ({f['eval_loss_before']:.4f} -> {f['eval_loss_after']:.4f})",
        f"{f['tokens_per_s']:.0f}",
        f"{f['step_time_s'] * 1000:.1f}",
        f"{f['peak_memory_bytes'] / 2**20:.0f}",
    ]


def markdown(report: dict[str, Any]) -> str:
    lines = [f"# Accelerator check ({report['device']})", "", f"{report['stack']}; {report['finished_at']}"]
    lines += _table(MODEL_COLUMNS, [_model_cells(r) for r in report["models"]])
    if report["training"]:
        lines += _table(TRAINING_COLUMNS, [_training_cells(r) for r in report["training"]])
    serving = report["serving"]
    lines += [
        "",
        f"Serving: {serving['engine']} is {'installed' if serving['installed'] else 'not installed'} in this "
        "interpreter; the check does not start a server."
        + (f" The stage would plan on: {serving['plan_device']}." if "plan_device" in serving else ""),
    ]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    p.add_argument("--out", type=Path, default=REPO / "logs" / "accelerator_check")
    p.add_argument("--models", default=",".join(DEFAULT_MODELS))
    p.add_argument("--limit-s", type=float, default=600.0, help="the whole check's time limit (default 600)")
    args = p.parse_args(argv)
    deadline = Deadline(args.limit_s)
    args.out.mkdir(parents=True, exist_ok=True)
    source = TorchSource(profiles=torch_source().profiles, wheel_dir=None)  # nothing is locked or installed
    rows = []
    for name in filter(None, (n.strip() for n in args.models.split(","))):
        if deadline.spent():
            rows.append({"model": name, "device": args.device, "ok": False, "error": "not run: time limit reached"})
            continue
        rows.append(check_one(name, args.out / "packages", args.device, source, deadline))
    trained = []
    for row in rows:
        if not row["ok"] or demo_spec(row["model"]).task_family != TRAINED_FAMILY:
            continue
        for method in ("full", "lora"):
            if deadline.spent():
                trained.append({"model": row["model"], "method": method, "ok": False, "error": "not run: time limit"})
                continue
            trained.append(train_one(row["model"], args.out / "packages" / row["model"], method, args.device, deadline))
    stack = next((r["stack"] for r in rows if r.get("stack")), None)
    report = {
        "device": args.device,
        "python": sys.executable,
        "stack": describe(stack) if stack else "-",
        "stack_detail": stack,
        "finished_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "models": rows,
        "training": trained,
        "serving": serving_row(args.device),
    }
    (args.out / "accelerator_check.json").write_text(json.dumps(report, indent=2, sort_keys=True) + "\n")
    (args.out / "accelerator_check.md").write_text(markdown(report))
    print(markdown(report))
    failed = [r for r in rows + trained if not r["ok"]]
    for r in failed:
        print(f"error: {r['model']}{' ' + r['method'] if 'method' in r else ''}: {r.get('error')}", file=sys.stderr)
    return 1 if failed or not rows else 0


if __name__ == "__main__":
    sys.exit(main())
