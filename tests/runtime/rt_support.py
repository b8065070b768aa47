"""Helpers for runtime tests: adaptation-like directories and demo runners.

Runtime code only runs inside a torch environment, so every check is a real subprocess of the
shared test env (bench/support/torch_env.py) on configs made by transformers' real classes.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
RUNTIME_PARENT = HERE.parents[1]
RESULT_MARKER = "ASCENDBRIDGE_RESULT "
# What the generator's demo.py template boils down to.
DEMO_WRAPPER = "import sys\n\nfrom ab_runtime.demo import main\n\nraise SystemExit(main(sys.argv[1:]))\n"


def spec_for(entry: dict[str, Any], **extra: Any) -> dict[str, Any]:
    """A minimal adaptation.json for a config-only tiny model directory."""
    spec = {
        "name": entry["name"],
        "model": {"model_id": f"tiny/{entry['name']}", "source": "local", "path": entry["path"], "has_weights": False},
        "task_family": entry["family"],
        "model_class": entry["model_class"],
    }
    spec.update(extra)
    return spec


def write_spec(directory: Path, name: str, spec: dict[str, Any]) -> str:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{name}.json"
    path.write_text(json.dumps(spec))
    return str(path)


def make_adaptation(root: Path, spec: dict[str, Any]) -> Path:
    """An adaptation-like directory: ab_runtime copied verbatim, adaptation.json, demo.py."""
    root.mkdir(parents=True, exist_ok=True)
    shutil.copytree(
        RUNTIME_PARENT / "ab_runtime",
        root / "ab_runtime",
        ignore=shutil.ignore_patterns("__pycache__"),
        dirs_exist_ok=True,
    )
    (root / "adaptation.json").write_text(json.dumps(spec, indent=2))
    (root / "demo.py").write_text(DEMO_WRAPPER)
    return root


def parse_result(stdout: str) -> dict[str, Any] | None:
    """The RESULT line's JSON when it is the last stdout line, else None."""
    lines = stdout.strip().splitlines()
    if not lines or not lines[-1].startswith(RESULT_MARKER):
        return None
    return json.loads(lines[-1][len(RESULT_MARKER) :])


def run_probe(python: Path, code: str, *args: str, timeout: float = 300, env: dict[str, str] | None = None) -> Any:
    """`python -c code RUNTIME_PARENT *args` in the torch env: the JSON of its last stdout line."""
    proc = subprocess.run(
        [str(python), "-c", code, str(RUNTIME_PARENT), *args], capture_output=True, text=True, timeout=timeout, env=env
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.splitlines()[-1])


def run_batch(python: Path, argvs: list[Any], env: dict[str, str] | None = None) -> list[dict[str, Any]]:
    """ab_runtime.demo.main once per argv list (ab_runtime.parity's for {"module": "parity", "argv"}),
    all in one torch process (imports cost ~7 s)."""
    proc = subprocess.run(
        [str(python), str(HERE / "batch_demo.py"), str(RUNTIME_PARENT), json.dumps(argvs)],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    runs = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    assert len(runs) == len(argvs), proc.stdout[-3000:]
    return runs


def run_demo(
    python: Path, directory: Path, *args: str, env: dict[str, str] | None = None, timeout: int = 300
) -> subprocess.CompletedProcess:
    """`python demo.py ARGS` with cwd = the adaptation directory, as a user runs it."""
    return subprocess.run(
        [str(python), "demo.py", *args], cwd=directory, capture_output=True, text=True, timeout=timeout, env=env
    )
