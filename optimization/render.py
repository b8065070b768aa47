"""Render accuracy_run_perf.py into an adaptation with the chosen passes baked in."""

from __future__ import annotations

import json
from pathlib import Path

from jinja2 import Environment, FileSystemLoader, StrictUndefined

from ab_runtime.fileops import write_text_atomic
from ab_runtime.metrics_file import PREFIXES
from ascendbridge.package.spec import AdaptationSpec

TEMPLATES = Path(__file__).resolve().parent / "templates"
ACCURACY_RUN_PERF = "accuracy_run_perf.py"
PERF_METRICS_PREFIX = PREFIXES["perf"][1]  # ab_runtime.optimize.perf_run's evidence; never benchmark_metrics_*


def render_text(spec: AdaptationSpec, passes: list[str], device: str) -> str:
    env = Environment(
        loader=FileSystemLoader(str(TEMPLATES)), undefined=StrictUndefined, keep_trailing_newline=True, autoescape=False
    )
    return env.get_template(f"{ACCURACY_RUN_PERF}.j2").render(
        model_id=spec.model.model_id,
        task_family=spec.task_family,
        device=device,
        passes=passes,
        passes_literal=json.dumps(list(passes)),
    )


def render_accuracy_run_perf(spec: AdaptationSpec, directory: Path, passes: list[str], device: str) -> Path:
    """Write `<directory>/accuracy_run_perf.py` atomically; untouched when the content is the same."""
    path = Path(directory) / ACCURACY_RUN_PERF
    text = render_text(spec, passes, device)
    if not path.is_file() or path.read_text() != text:
        write_text_atomic(path, text)
    return path
