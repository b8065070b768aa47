"""The memory plans against what the stages really hold: GPT-2 shapes (GPT-2's vocabulary, random
weights: a dry run) at a few depths through the real benchmark or training stage on this host's
CPU; per depth, the plan's predicted host peak beside the measured one: each benchmark accuracy
run's own peak resident memory (ru_maxrss, as its RESULT records it), or for training the largest
resident memory of any process the stage ran (its contract's and its run's, RUSAGE_CHILDREN's
ru_maxrss). Not a test: it syncs a package environment per depth.

    uv run python bench/memory_plans.py benchmark [--layers 2 6]
    uv run python bench/memory_plans.py training --layers 4 [--method lora]
"""

from __future__ import annotations

import argparse
import io
import json
import os
import resource
import tempfile
from pathlib import Path
from typing import Any

from ascendbridge.board import BoardStore, Registration
from ascendbridge.board.records import ModelRecord, TaskRecord, TrainingJob
from ascendbridge.config import REPO_ROOT
from ascendbridge.discovery.config_estimate import estimate_parameters
from ascendbridge.memory_plan import GIB
from ascendbridge.package.generator import generate
from ascendbridge.package.spec import AdaptationSpec, InputRecipe, ModelSource
from ascendbridge.stage_api import StageOutcome
from bench.support.local_model import local_context
from benchmark.stage import BENCHMARK_STAGE
from training.stage import TRAINING_STAGE

CORPUS = REPO_ROOT / "training" / "corpus" / "tiny_stories.jsonl"
SETTINGS: dict[str, dict[str, Any]] = {
    "benchmark": {"benchmark_dtypes": "float32 bfloat16", "benchmark_iters": 2, "benchmark_warmup": 1},
    "training": {"training_contract_steps": 2, "training_checkpoint_every": 2},
}
HEADER = "| stage | layers | parameters | what | plan's host peak | measured peak | plan / measured |"


def gpt2(layers: int) -> dict[str, object]:
    return {
        "architectures": ["GPT2LMHeadModel"],
        "model_type": "gpt2",
        "n_layer": layers,
        "n_embd": 768,
        "n_head": 12,
        "vocab_size": 50257,
        "n_positions": 256,
    }


def registered(root: Path, layers: int, job: TrainingJob | None, stage: str) -> tuple[ModelRecord, TaskRecord, Path]:
    """A fresh board under `root` with the model registered and its package generated."""
    for name, sub in (("BOARD", "board.db"), ("LOGS", "logs"), ("ADAPTATIONS", "adaptations")):
        os.environ[f"ASCENDBRIDGE_{name}"] = str(root / sub)
    board = BoardStore.init(root / "board.db")
    config = gpt2(layers)
    model_dir = root / "model"
    model_dir.mkdir(parents=True)
    (model_dir / "config.json").write_text(json.dumps(config))
    registration = Registration(model_id="bench/gpt2", source="local", path=str(model_dir), training=job)
    ((record, _),) = board.register_models([registration])
    spec = AdaptationSpec(
        name=record.adaptation_name,
        model=ModelSource(model_id=record.model_id, source="local", path=str(model_dir), has_weights=False),
        task_family="causal_lm",
        model_class="GPT2LMHeadModel",
        model_type="gpt2",
        inputs=InputRecipe(batch_size=1, seq_len=64),
    )
    directory = root / "adaptations" / record.adaptation_name
    assert generate(spec, directory).ok
    task = board.list_tasks(stage=stage, model_id=record.model_id)[0]
    return record.model_copy(update={"parameter_count": estimate_parameters(config)}), task, directory


def run_stage(root: Path, layers: int, stage: str, method: str) -> tuple[StageOutcome, dict[str, Any]]:
    """The stage's outcome (it must be done) and its recorded memory plan."""
    job = TrainingJob(data=str(CORPUS), method=method, steps=4) if stage == "training" else None
    record, task, directory = registered(root, layers, job, stage)
    log = io.StringIO()
    ctx = local_context(record, task, directory, root / "board.db", log, **SETTINGS[stage])
    outcome = (TRAINING_STAGE if stage == "training" else BENCHMARK_STAGE).run(ctx)
    if outcome.status != "done":
        raise SystemExit(f"{stage} failed: {outcome.summary}\n{log.getvalue()[-3000:]}")
    return outcome, outcome.result["memory_plan"]


def measure(root: Path, layers: int, stage: str, method: str) -> list[str]:
    """One depth through one stage: its plan's host peak beside the measured peaks, as table rows."""
    outcome, plan = run_stage(root, layers, stage, method)
    predicted = plan["needs_bytes"]["host"]
    if stage == "training":
        peaks = [(f"{method}, contract and run", resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024)]
    else:
        peaks = [(str(run["dtype"]), int(run["peak_memory_bytes"])) for run in outcome.result["runs"]]
    return [
        f"| {stage} | {layers} | {plan['parameters'] / 1e6:.1f} M | {what} | {predicted / GIB:.2f} GiB | "
        f"{peak / GIB:.2f} GiB | {predicted / peak:.2f} |"
        for what, peak in peaks
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("stage", choices=sorted(SETTINGS))
    parser.add_argument("--layers", type=int, nargs="+", default=[2, 6])
    parser.add_argument("--method", choices=("full", "lora"), default="lora", help="the training job's")
    args = parser.parse_args()
    if args.stage == "training" and len(args.layers) > 1:  # RUSAGE_CHILDREN keeps its maximum
        parser.error("training measures one depth per run")
    rows = [HEADER, "| --- " * 7 + "|"]
    for layers in args.layers:
        with tempfile.TemporaryDirectory() as tmp:
            rows += measure(Path(tmp), layers, args.stage, args.method)
    print("\n".join(rows))


if __name__ == "__main__":
    main()
