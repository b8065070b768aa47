"""The first thing every gate checks: the code in the adaptation is the framework's code.

Evidence is only as good as the code that produced it. A generated wrapper (accuracy_run.py,
accuracy_run_perf.py) must be byte-identical to what the generator renders from the spec, and
the adaptation's `ab_runtime/` must be byte-identical to the framework's copy
(ab_runtime): no file changed, missing or added. Only then does a gate look
at the figures. No torch needed.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from ascendbridge.config import RUNTIME_DIR, RUNTIME_NAME


def _files(root: Path) -> dict[str, Path]:
    return {
        p.relative_to(root).as_posix(): p
        for p in sorted(root.rglob("*"))
        if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc"
    }


def runtime_problems(adaptation_dir: Path, framework_runtime: Path = RUNTIME_DIR) -> list[str]:
    """Differences between `<adaptation>/ab_runtime/` and the framework's runtime package."""
    copy = Path(adaptation_dir) / RUNTIME_NAME
    if not copy.is_dir():
        return [f"{RUNTIME_NAME}/ missing: the adaptation was not rendered by the generator"]
    want, have = _files(Path(framework_runtime)), _files(copy)
    problems = [
        f"{RUNTIME_NAME}/{rel} differs from the framework's copy (rendered by another version, or edited since)"
        for rel in sorted(set(want) & set(have))
        if want[rel].read_bytes() != have[rel].read_bytes()
    ]
    problems += [f"{RUNTIME_NAME}/{rel} missing" for rel in sorted(set(want) - set(have))]
    problems += [
        f"{RUNTIME_NAME}/{rel} is not part of the framework's runtime" for rel in sorted(set(have) - set(want))
    ]
    return problems


def wrapper_problems(adaptation_dir: Path, expected: Mapping[str, str]) -> list[str]:
    """Each generated wrapper (file name -> text the generator renders now) present and unchanged."""
    problems = []
    for name, text in expected.items():
        path = Path(adaptation_dir) / name
        if not path.is_file():
            problems.append(f"{name} missing")
        elif path.read_bytes() != text.encode():
            problems.append(
                f"{name} differs from what the generator renders from the spec (edited by hand "
                "or by an agent): its evidence is not trusted"
            )
    return problems


def code_problems(adaptation_dir: Path, expected: Mapping[str, str]) -> list[str]:
    """Wrappers first, then the runtime copy; empty when the adaptation runs the framework's code."""
    return wrapper_problems(adaptation_dir, expected) + runtime_problems(adaptation_dir)
