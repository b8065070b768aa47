"""Tiny real adaptations for the optimization tests: generator output plus the shared torch env.

`make_adaptation` renders a config-only local model (real generator output, runtime copied
verbatim) and links the shared torch test environment in as its `.venv`, so the runtime search,
accuracy_run_perf.py and both gates run exactly as in a synced adaptation.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

from ascendbridge.config import REPO_ROOT
from ascendbridge.package.generator import render_adaptation
from ascendbridge.package.spec import RESULT_MARKER, AdaptationSpec, DtypePolicy, InputRecipe, ModelSource, WorkloadSpec

DEMO = REPO_ROOT / "demo_models"


def make_adaptation(
    root: Path,
    name: str,
    config: dict[str, Any],
    family: str,
    model_class: str,
    python: Path | None = None,
    batch: int = 2,
    seq_len: int = 16,
    image_size: int | None = None,
    dtype: str = "float32",
    workload: WorkloadSpec | None = None,
) -> Path:
    model_dir = root / "models" / name
    model_dir.mkdir(parents=True, exist_ok=True)
    (model_dir / "config.json").write_text(json.dumps(config))
    spec = AdaptationSpec(
        name=name,
        model=ModelSource(model_id=f"demo/{name}", source="local", path=str(model_dir), has_weights=False),
        task_family=family,
        model_class=model_class,
        model_type=config["model_type"],
        inputs=InputRecipe(batch_size=batch, seq_len=seq_len, image_size=image_size),
        dtype=DtypePolicy(target=dtype),
        # The pass-search tests time the accuracy forward (their figures and costs were sized for it)
        # unless a test names a workload (the decode-pass search: a tiny generation).
        workload=workload or WorkloadSpec(name="forward"),
    )
    directory = root / "adaptations" / name
    render_adaptation(spec, directory)
    if python is not None:  # the shared test env stands in for the adaptation's synced .venv
        venv = directory / ".venv"
        if not venv.exists():
            venv.symlink_to(Path(python).absolute().parent.parent, target_is_directory=True)
    return directory


def demo_config(name: str) -> dict[str, Any]:
    return json.loads((DEMO / name / "config.json").read_text())


def run_py(
    python: Path, directory: Path, *argv: str, timeout: float = 900, env: dict[str, str] | None = None
) -> tuple[int, dict[str, Any], str]:
    """(exit code, parsed RESULT, combined output) of `python ARGV` in the adaptation; `env` is
    added to (and overrides) the inherited environment."""
    proc = subprocess.run(
        [str(python), *argv],
        cwd=directory,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **env} if env else None,
    )
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith(RESULT_MARKER)]
    result = json.loads(lines[-1][len(RESULT_MARKER) :]) if lines else {}
    return proc.returncode, result, proc.stdout + proc.stderr


def finish(python: Path, directory: Path, chosen: list[str], *extra: str) -> dict[str, Any]:
    """What the optimization stage does after the search: render accuracy_run_perf.py with `chosen`,
    run it (`extra`: more arguments, e.g. the workload), record the perf run in the notes."""
    from ab_runtime.accuracy_standard import accuracy_summary
    from ab_runtime.optimize.notes_file import NOTES_FILE
    from optimization.render import render_accuracy_run_perf

    render_accuracy_run_perf(AdaptationSpec.load(directory), directory, chosen, "cpu")
    code, result, output = run_py(python, directory, "accuracy_run_perf.py", "--device", "cpu", "--iters", "2", *extra)
    assert code == 0 and result["ok"], output[-3000:]
    notes = json.loads((directory / NOTES_FILE).read_text())
    metrics = json.loads((directory / result["metrics"]).read_text())
    copied = {key: result[key] for key in ("metrics", "outputs", "trace", "speedup", "interval")}
    notes["perf_run"] = {**copied, "accuracy": accuracy_summary(metrics["accuracy"])}  # as the stage records it
    (directory / NOTES_FILE).write_text(json.dumps(notes))
    return result
