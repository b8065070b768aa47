"""The memory plan against what the benchmark really holds: GPT-2 shapes (width 768, GPT-2's
vocabulary, random weights: a dry run) at a few depths through the real benchmark stage on this
host's CPU; per depth, the plan's predicted host peak and each accuracy run's peak resident memory
(ru_maxrss, as its RESULT records it). Not a test: it syncs a package environment per depth.

    uv run python bench/memory_plan_accuracy.py [--layers 2 6]
"""

from __future__ import annotations

import argparse
import io
import json
import os
import tempfile
from pathlib import Path
from typing import Any

from ascendbridge.board import BoardStore, Registration
from ascendbridge.discovery.config_estimate import estimate_parameters
from ascendbridge.memory_plan import GIB
from ascendbridge.package.generator import generate
from ascendbridge.package.spec import AdaptationSpec, InputRecipe, ModelSource
from bench.support.local_model import local_context
from benchmark.stage import BENCHMARK_STAGE

SETTINGS: dict[str, Any] = {"benchmark_dtypes": "float32 bfloat16", "benchmark_iters": 2, "benchmark_warmup": 1}


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


def measure(root: Path, layers: int) -> list[str]:
    """The benchmark stage on one depth: its plan's host peak beside each run's peak, as table rows."""
    for name, sub in (("BOARD", "board.db"), ("LOGS", "logs"), ("ADAPTATIONS", "adaptations")):
        os.environ[f"ASCENDBRIDGE_{name}"] = str(root / sub)
    board = BoardStore.init(root / "board.db")
    config = gpt2(layers)
    model_dir = root / "model"
    model_dir.mkdir(parents=True)
    (model_dir / "config.json").write_text(json.dumps(config))
    ((record, _),) = board.register_models([Registration(model_id="bench/gpt2", source="local", path=str(model_dir))])
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
    task = board.list_tasks(stage="benchmark", model_id=record.model_id)[0]
    record = record.model_copy(update={"parameter_count": estimate_parameters(config)})
    log = io.StringIO()
    ctx = local_context(record, task, directory, root / "board.db", log, **SETTINGS)
    outcome = BENCHMARK_STAGE.run(ctx)
    if outcome.status != "done":
        raise SystemExit(f"benchmark failed: {outcome.summary}\n{log.getvalue()[-3000:]}")
    plan = outcome.result["memory_plan"]
    predicted = plan["needs_bytes"]["host"]
    return [
        f"| {layers} | {plan['parameters'] / 1e6:.1f} M | {run['dtype']} | {predicted / GIB:.2f} GiB | "
        f"{run['peak_memory_bytes'] / GIB:.2f} GiB | {predicted / run['peak_memory_bytes']:.2f} |"
        for run in outcome.result["runs"]
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, nargs="+", default=[2, 6])
    args = parser.parse_args()
    rows = ["| layers | parameters | dtype | plan's host peak | measured peak | plan / measured |", "| --- " * 6 + "|"]
    for layers in args.layers:
        with tempfile.TemporaryDirectory() as tmp:
            rows += measure(Path(tmp), layers)
    print("\n".join(rows))


if __name__ == "__main__":
    main()
