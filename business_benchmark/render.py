"""Render business_run.py into an adaptation, and copy the sets it reads next to it.

Only the docstring is templated, so re-rendering an unchanged spec is byte-identical. The sets go
to `<adaptation>/business_data/` so the package stays self-contained (it runs on another machine
without this repository); each copy is digest-checked against its data card first.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from jinja2 import Environment, FileSystemLoader, StrictUndefined

from ab_runtime.fileops import atomic_path, write_text_atomic
from business_benchmark.datasets import DATA_DIR, load_card, verify_file

TEMPLATES = Path(__file__).resolve().parent / "templates"
BUSINESS_RUN = "business_run.py"
DATA_SUBDIR = "business_data"


def render_business_run_text(model_id: str, task_family: str) -> str:
    env = Environment(
        loader=FileSystemLoader(str(TEMPLATES)), undefined=StrictUndefined, keep_trailing_newline=True, autoescape=False
    )
    return env.get_template(f"{BUSINESS_RUN}.j2").render(model_id=model_id, task_family=task_family)


def write_if_changed(path: Path, text: str) -> Path:
    if not path.is_file() or path.read_text() != text:
        write_text_atomic(path, text)
    return path


def render_business_run(model_id: str, task_family: str, directory: Path) -> Path:
    return write_if_changed(Path(directory) / BUSINESS_RUN, render_business_run_text(model_id, task_family))


def copy_sets(names: list[str], directory: Path) -> Path:
    """Copy the named bundled sets (those with a file) into `<directory>/business_data/`."""
    target = Path(directory) / DATA_SUBDIR
    target.mkdir(exist_ok=True)
    for name in names:
        card = load_card(name)
        if card.file is None:
            continue
        problem = verify_file(card, DATA_DIR / card.file)
        if problem:
            raise ValueError(problem)
        if verify_file(card, target / card.file) is not None:
            with atomic_path(target / card.file) as tmp:
                shutil.copyfile(DATA_DIR / card.file, tmp)
    return target
