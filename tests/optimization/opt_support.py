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
from typing import Any, Optional

from adaptation.generator import render_adaptation
from adaptation.spec import RESULT_MARKER, AdaptationSpec, DtypePolicy, InputRecipe, ModelSource, WorkloadSpec
from ascendbridge.config import REPO_ROOT

DEMO = REPO_ROOT / "demo_models"


def make_adaptation(root: Path, name: str, config: dict[str, Any], family: str, model_class: str,
                    python: Optional[Path] = None, batch: int = 2, seq_len: int = 16,
                    image_size: Optional[int] = None, dtype: str = "float32") -> Path:
    model_dir = root / "models" / name
    model_dir.mkdir(parents=True, exist_ok=True)
    (model_dir / "config.json").write_text(json.dumps(config))
    spec = AdaptationSpec(
        name=name, model=ModelSource(model_id=f"demo/{name}", source="local", path=str(model_dir), has_weights=False),
        task_family=family, model_class=model_class, model_type=config["model_type"],
        inputs=InputRecipe(batch_size=batch, seq_len=seq_len, image_size=image_size), dtype=DtypePolicy(target=dtype),
        # The pass-search tests time the accuracy forward (their figures and costs were sized for it);
        # the generation / sweep headline of the optimizer is exercised by bench/workload_suite.py.
        workload=WorkloadSpec(name="forward"),
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


def run_py(python: Path, directory: Path, *argv: str, timeout: float = 900,
           env: Optional[dict[str, str]] = None) -> tuple[int, dict[str, Any], str]:
    """(exit code, parsed RESULT, combined output) of `python ARGV` in the adaptation; `env` is
    added to (and overrides) the inherited environment."""
    proc = subprocess.run([str(python), *argv], cwd=directory, capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **env} if env else None)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith(RESULT_MARKER)]
    result = json.loads(lines[-1][len(RESULT_MARKER):]) if lines else {}
    return proc.returncode, result, proc.stdout + proc.stderr
