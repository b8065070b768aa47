"""Helpers of the training tests: a demo model's training package and stage context, a train.json for
a demo model, the command lines, the logs."""

from __future__ import annotations

import io
import json
import os
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ascendbridge.board import BoardStore, Registration
from ascendbridge.board.records import ModelRecord, TrainingJob
from ascendbridge.config import REPO_ROOT
from ascendbridge.package.generator import generate
from ascendbridge.package.spec import AdaptationSpec, ModelSource
from ascendbridge.stage_api import StageContext
from tests.teamlead.tl_support import tl_argv

CORPUS = REPO_ROOT / "training" / "corpus" / "tiny_stories.jsonl"
DEMO = REPO_ROOT / "demo_models"
# The settings of a quick training pass: one thread, a checkpoint every 2 steps, a 2-step contract.
QUICK_TRAINING = ("training.threads=1", "training.checkpoint_every=2", "training.contract_steps=2")
# The task family of each demo model's architecture the training tests register.
FAMILY = {
    "LlamaForCausalLM": "causal_lm",
    "BertForMaskedLM": "masked_lm",
    "BertForSequenceClassification": "sequence_classification",
}


def training_package(
    board: BoardStore,
    model_id: str,
    job: TrainingJob,
    model: str = "tiny-llama",
    python: Path | None = None,
    has_weights: bool = False,
) -> tuple[ModelRecord, Path]:
    """A demo model registered with `job` and its package generated (config-initialised unless
    `has_weights`), its environment the shared torch one (system mode, no `uv sync` of torch) when
    `python` is given: (its record, the package)."""
    path = str(DEMO / model)
    ((record, _),) = board.register_models([Registration(model_id=model_id, source="local", path=path, training=job)])
    config = json.loads((DEMO / model / "config.json").read_text())
    spec = AdaptationSpec(
        name=record.adaptation_name,
        task_family=FAMILY[config["architectures"][0]],
        model_class=config["architectures"][0],
        model_type=config["model_type"],
        model=ModelSource(model_id=model_id, source="local", path=path, has_weights=has_weights),
    )
    directory = Path(board.path).parent / "adaptations" / record.adaptation_name
    assert generate(spec, directory).ok
    if python is not None:
        record = board.set_env_mode(model_id, "system", str(python))
    return record, directory


def training_context(
    board: BoardStore, record: ModelRecord, directory: Path, settings: dict[str, Any] | None = None
) -> StageContext:
    """The training stage's context for `record`'s package, its log kept in memory (`ctx.log.getvalue()`)."""
    return StageContext(
        model=record,
        task=board.list_tasks(stage="training", model_id=record.model_id)[0],
        adaptation_dir=directory,
        board_path=Path(board.path),
        log=io.StringIO(),
        settings=settings or {},
    )


def training_lead_argv(board: Path, *args: str, sets: Sequence[str] = ()) -> list[str]:
    """A team-lead pass over the training stage (the team-lead tests' quick lease and poll), each of sets a --set."""
    return tl_argv(board, "--stages", "training", *args, *(arg for value in sets for arg in ("--set", value)))


def write_config(path: Path, **settings: Any) -> Path:
    """A train.json for a demo model on the bundled corpus (tiny-llama, 8 steps unless told)."""
    config = {"model_dir": str(DEMO / "tiny-llama"), "corpus": str(CORPUS), "steps": 8, "checkpoint_every": 0}
    config.update(settings)
    path.write_text(json.dumps(config))
    return path


def train_cmd(python: Path, config: Path, out: Path, command: str = "train", nproc: int = 1) -> list[str]:
    launcher = (
        [str(python), "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", str(nproc)]
        if nproc > 1
        else [str(python)]
    )
    return [*launcher, "-m", "ab_runtime.train.run", command, "--config", str(config), "--out", str(out)]


def run_env(**extra: str) -> dict[str, str]:
    """The environment a training run gets: ab_runtime importable from the repository, one thread."""
    return {**os.environ, "PYTHONPATH": str(REPO_ROOT), "OMP_NUM_THREADS": "1", **extra}


def run(cmd: list[str], timeout: float = 300, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        cmd, capture_output=True, text=True, timeout=timeout, env=run_env(**(env or {})), cwd=REPO_ROOT
    )


def metrics(out: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines() if line.strip()]
