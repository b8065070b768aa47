"""Render accuracy_run.py into an adaptation (framework side).

Only the docstring is templated; the body is the same for every model and reads adaptation.json
at run time, so re-rendering an unchanged spec is byte-identical and leaves the file untouched.
"""

from __future__ import annotations

from pathlib import Path

from jinja2 import Environment, FileSystemLoader, StrictUndefined

from ab_runtime.fileops import write_text_atomic
from ascendbridge.package.spec import AdaptationSpec

TEMPLATES = Path(__file__).resolve().parent / "templates"
ACCURACY_RUN = "accuracy_run.py"


def render_accuracy_run_text(spec: AdaptationSpec) -> str:
    env = Environment(
        loader=FileSystemLoader(str(TEMPLATES)), undefined=StrictUndefined, keep_trailing_newline=True, autoescape=False
    )
    return env.get_template(f"{ACCURACY_RUN}.j2").render(model_id=spec.model.model_id, task_family=spec.task_family)


def render_accuracy_run(spec: AdaptationSpec, directory: Path) -> Path:
    """Write `<directory>/accuracy_run.py`; rewrite only when the content changed."""
    path = Path(directory) / ACCURACY_RUN
    text = render_accuracy_run_text(spec)
    if not path.is_file() or path.read_text() != text:
        write_text_atomic(path, text)
    return path
