"""Re-verify an exported AscendBridge package from the export alone (standard library only).

    python3 check_package.py [PACKAGE_DIR] [--run]

Checks that `manifest.json` lists every file of the package with its sha256 and that every
listed file is there unchanged (nothing added, nothing edited), that the results the manifest
(and the repository README) state are the ones the evidence files contain, and that the manifest
names the stack the results were measured on. `--run` also syncs the cpu profile and runs the
demo's dry run with uv. Exit 0: verified; 1: a check failed (one line per failure); 2: bad input.
This file is copied verbatim into every exported package.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys
from pathlib import Path
from typing import Any, NoReturn

MANIFEST = "manifest.json"
SELF = "check_package.py"
SKIPPED_PARTS = (".venv", "__pycache__")


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def package_files(root: Path) -> list[str]:
    """Every file of the package except the manifest itself and local environments."""
    return sorted(
        p.relative_to(root).as_posix()
        for p in root.rglob("*")
        if p.is_file() and p.name != MANIFEST and not any(s in p.parts for s in SKIPPED_PARTS) and p.suffix != ".pyc"
    )


def results_from_evidence(root: Path) -> list[dict[str, Any]]:
    """One row per benchmark run found in the evidence (benchmark_metrics_*.json), sorted.

    Read with the format's one reader, `ab_runtime/metrics_file.py` (standard library only): in an
    export the package's own copy (its folder is put first on the path when this file runs as a
    script), imported only here, after `verify` found every file as the manifest lists it."""
    from ab_runtime.metrics_file import find_metrics

    return [
        {
            "evidence": m.path.name,
            "device": m.run.device,
            "dtype": m.run.dtype,
            "mode": m.run.mode,
            "median_ms": m.median_ms,
            "samples_per_s": m.samples_per_s,
            "accuracy": m.verdict,
            "proxy": m.proxy,  # `proxy: N of M layers` for a reduced-depth proxy's figures, else None
        }
        for m in find_metrics(root)
    ]


def optimization_from_evidence(root: Path) -> dict[str, Any] | None:
    """The optimization's confirmed result from `optimization_notes.json` (None without one), read with
    the format's one reader, `ab_runtime/optimize/notes_file.py`, imported as `results_from_evidence` says."""
    from ab_runtime.optimize.notes_file import NOTES_FILE, read_notes

    if not (root / NOTES_FILE).is_file():
        return None
    final = read_notes(root / NOTES_FILE)["final"] or {}
    return {"speedup": final.get("speedup"), "outcome": final.get("outcome")}


def verify(root: Path) -> list[str]:
    problems: list[str] = []
    manifest = json.loads((root / MANIFEST).read_text())
    listed: dict[str, str] = manifest.get("files") or {}
    present = package_files(root)
    for rel in sorted(set(present) - set(listed)):
        problems.append(f"{rel}: not in the manifest")
    for rel, digest in sorted(listed.items()):
        path = root / rel
        if not path.is_file():
            problems.append(f"{rel}: listed in the manifest but missing")
        elif sha256(path) != digest:
            problems.append(f"{rel}: sha256 differs from the manifest")
    if not problems:
        if manifest.get("results") != results_from_evidence(root):
            problems.append("manifest results differ from the benchmark evidence files")
        if manifest.get("optimization") != optimization_from_evidence(root):
            problems.append("manifest optimization result differs from optimization_notes.json")
        stack = manifest.get("stack") or {}
        if not stack.get("stack_id") or not (stack.get("data") or {}).get("torch"):
            problems.append("manifest does not name the stack (stack_id and torch) the results were measured on")
    return problems


def run_demo(root: Path) -> list[str]:
    for argv in (["uv", "sync", "--extra", "cpu"], ["uv", "run", "--no-sync", "python", "demo.py", "--dry-run"]):
        done = subprocess.run(argv, cwd=root, capture_output=True, text=True)
        if done.returncode != 0:
            tail = (done.stdout + done.stderr).strip().splitlines()[-1:] or [""]
            return [f"{' '.join(argv)} failed (exit {done.returncode}): {tail[0]}"]
    return []


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # one line and exit 2, like every AscendBridge command
        print(f"error: {message} (see: check_package.py --help)", file=sys.stderr)
        sys.exit(2)


def main(argv: list[str]) -> int:
    parser = _Parser(prog="check_package.py", description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("package", nargs="?", help="the package folder (default: this file's)")
    parser.add_argument("--run", action="store_true", help="also sync the cpu profile and run the demo's dry run")
    args = parser.parse_args(argv)
    root = Path(args.package or Path(__file__).resolve().parent).resolve()
    if not (root / MANIFEST).is_file():
        print(f"error: {root} has no {MANIFEST}", file=sys.stderr)
        return 2
    try:
        problems = verify(root)
    except (OSError, ValueError, KeyError, TypeError, ImportError) as exc:
        print(f"error: unreadable package {root.name}: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 2
    if not problems and args.run:
        problems = run_demo(root)
    for problem in problems:
        print(f"FAIL {root.name}: {problem}")
    if problems:
        return 1
    print(f"PASS {root.name}: {len(package_files(root))} files match the manifest; results match the evidence")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent))  # the package's ab_runtime, also under `python -I`
    sys.exit(main(sys.argv[1:]))
