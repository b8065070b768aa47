"""Adaptations for the business benchmark tests: real generator output + business_run.py + sets.

Tiny models come from demo_models/ (config only: agreement-only path); the real MiniLM from
ascendbridge.demo_models.ensure_minilm(). Runs use the shared torch test environment's
interpreter, as a user's `uv run business_run.py` would run in the adaptation's own env.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from ascendbridge.package.generator import render_adaptation
from ascendbridge.package.spec import RESULT_MARKER, AdaptationSpec, DtypePolicy, InputRecipe, ModelSource
from business_benchmark.evidence import PREDICTIONS_PREFIX, build_evidence, read_json, stem
from business_benchmark.mapping import evaluations_for
from business_benchmark.pass_rule import PassRule
from business_benchmark.render import BUSINESS_RUN, copy_sets, render_business_run

REPO = Path(__file__).resolve().parents[2]
DEMO = REPO / "demo_models"


def make_adaptation(
    root: Path,
    name: str,
    model_dir: Path,
    family: str,
    model_class: str,
    *,
    has_weights: bool = False,
    pooling: str | None = None,
    model_id: str | None = None,
) -> Path:
    spec = AdaptationSpec(
        name=name,
        model=ModelSource(
            model_id=model_id or f"demo/{name}", source="local", path=str(model_dir), has_weights=has_weights
        ),
        task_family=family,
        model_class=model_class,
        inputs=InputRecipe(seq_len=16),
        dtype=DtypePolicy(target="float32"),
        sentence_transformers_pooling=pooling,
    )
    directory = root / name
    render_adaptation(spec, directory)
    render_business_run(spec.model.model_id, family, directory)
    copy_sets([e.set for e in evaluations_for(family, sentence_transformers=bool(pooling))], directory)
    return directory


def run_business(
    python: Path,
    directory: Path,
    family: str,
    *,
    dtype: str = "bfloat16",
    pretrained: bool = False,
    sentence_transformers: bool = False,
    extra: tuple[str, ...] = (),
    env: dict[str, str] | None = None,
) -> tuple[Path, dict[str, Any], subprocess.CompletedProcess]:
    """Run business_run.py, then derive the evidence: (metrics path, RESULT, process)."""
    mode = "pretrained" if pretrained else "dry_run"
    out = f"{PREDICTIONS_PREFIX}{stem('cpu', dtype, mode)}.json"
    evals = [f"--eval={e.set}:{e.task}" for e in evaluations_for(family, sentence_transformers=sentence_transformers)]
    argv = [str(python), BUSINESS_RUN, "--device", "cpu", "--dtype", dtype, "--out", out, *evals, *extra]
    proc = subprocess.run(
        argv + (["--use-pretrained"] if pretrained else []),
        cwd=directory,
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
    )
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith(RESULT_MARKER)]
    result = json.loads(lines[-1][len(RESULT_MARKER) :]) if lines else {}
    assert proc.returncode == 0 and result.get("ok"), proc.stderr[-3000:]
    return build_evidence(directory / out, PassRule()), result, proc


def demo_dir(name: str) -> Path:
    return DEMO / name


def load(path: Path) -> dict[str, Any]:
    return read_json(path)
