"""The training package's files: train.py (rendered), the two train.json configs and the corpus copy.

Only train.py's docstring is templated, so re-rendering an unchanged job is byte-identical. The
corpus is copied into `train/data/` so the package stays self-contained (its run and the gate's
re-run read the same bytes on another machine); paths in the configs are relative to the package.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from jinja2 import Environment, FileSystemLoader, StrictUndefined

from ab_runtime.fileops import atomic_path, sha256_file, write_text_atomic
from ascendbridge.board.records import TrainingJob
from training.settings import TrainingSettings

TEMPLATES = Path(__file__).resolve().parent / "templates"
TRAIN_PY = "train.py"
TRAIN_DIR = "train"
TRAIN_CONFIG = "train/train.json"
CONTRACT_CONFIG = "train/contract.json"


def render_train_py_text(model_id: str, train_config: dict[str, Any]) -> str:
    """train.py from the model id and the training config (what the gate re-renders it from)."""
    env = Environment(
        loader=FileSystemLoader(str(TEMPLATES)), undefined=StrictUndefined, keep_trailing_newline=True, autoescape=False
    )
    return env.get_template(f"{TRAIN_PY}.j2").render(
        model_id=model_id,
        method=train_config["method"],
        steps=train_config["steps"],
        corpus=Path(train_config["corpus"]).name,
    )


def configs(
    model_dir: str, job: TrainingJob, settings: TrainingSettings, proxy_depth: int | None = None
) -> dict[str, dict[str, Any]]:
    """{relative path: config} of the training run and of the baseline contract (K steps, no checkpoints);
    `proxy_depth`: the model's registered reduced-depth proxy, which the harness builds."""
    train: dict[str, Any] = {
        "model_dir": model_dir,
        "corpus": f"{TRAIN_DIR}/data/{Path(job.data).name}",
        "steps": job.steps,
        "method": job.method,
        "seq_len": settings.seq_len,
        "batch": settings.batch,
        "accumulation": settings.accumulation,
        "lr": settings.lr,
        "seed": settings.seed,
        "precision": settings.precision,
        "device": settings.device,
        "strategy": "auto" if job.processes > 1 else "single",
        "checkpoint_every": min(settings.checkpoint_every, max(1, job.steps // 2)),
        "keep_last": settings.keep_last,
        "lora_rank": settings.lora_rank,
        "bf16_weights_above": None if settings.bf16_weights_above == "off" else settings.bf16_weights_above,
        **({"fault": settings.fault} if settings.fault else {}),
        **({"proxy_depth": proxy_depth} if proxy_depth else {}),
    }
    contract = contract_config(train, settings.contract_steps)
    return {TRAIN_CONFIG: train, CONTRACT_CONFIG: contract}


def contract_config(train: dict[str, Any], steps: int) -> dict[str, Any]:
    """The baseline contract's config: the training config's K-step, one-process twin (no checkpoints,
    no injected fault: the contract must judge the model, not the test's fault; no training pass: the
    pass search judges those against the contract's loss bounds itself)."""
    return {
        **{k: v for k, v in train.items() if k not in ("fault", "passes")},
        "steps": steps,
        "strategy": "single",
        "checkpoint_every": 0,
    }


def config_text(config: dict[str, Any]) -> str:
    return json.dumps(config, indent=1, sort_keys=True) + "\n"


def write_if_changed(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.is_file() or path.read_text() != text:
        write_text_atomic(path, text)
    return path


def render_package(
    directory: Path,
    model_id: str,
    model_dir: str,
    job: TrainingJob,
    settings: TrainingSettings,
    proxy_depth: int | None = None,
) -> dict[str, dict[str, Any]]:
    """Write train.py, the configs and the corpus copy into `directory`; returns the configs."""
    written = configs(model_dir, job, settings, proxy_depth)
    write_if_changed(directory / TRAIN_PY, render_train_py_text(model_id, written[TRAIN_CONFIG]))
    for relative, config in written.items():
        write_if_changed(directory / relative, config_text(config))
    source, copy = Path(job.data), directory / written[TRAIN_CONFIG]["corpus"]
    if not copy.is_file() or sha256_file(copy) != sha256_file(source):
        copy.parent.mkdir(parents=True, exist_ok=True)
        with atomic_path(copy) as tmp:
            shutil.copyfile(source, tmp)
    return written
