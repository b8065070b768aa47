"""Export completed adaptations as a standalone adaptations repository, or as zip files.

    uv run scripts/package_adaptations.py --out DIR [--models a,b] [--zip]
        [--board board.db] [--adaptations-dir adaptations]

Each completed adaptation (Benchmark completed on the board) becomes a self-contained folder:
the package as generated (no .venv), `manifest.json` (the sha256 of every file, the results as
the evidence files state them, the stack they were measured on) and `check_package.py`, which
re-verifies the folder from the export alone (`python3 check_package.py`). The repository gets a
README with a results table and `check_all.py`; `--zip` writes `<name>.zip` per package instead.
Exit 0: exported; 2: bad input (nothing written).
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
import zipfile
from pathlib import Path
from typing import Any

from ascendbridge.board import BoardError, BoardStore
from ascendbridge.board.records import ModelRecord, now_iso
from ascendbridge.cli_errors import OneLineParser
from ascendbridge.config import adaptations_dir, board_path
from ascendbridge.export import check_package
from ascendbridge.stack_identity import describe

CHECK_ALL = '''"""Re-verify every package of this export (each folder's own check_package.py).

    python3 check_all.py [--run]

--run also syncs each package's cpu profile and runs its demo's dry run. Exit 0: all verified;
1: a check failed; 2: bad input.
"""
import subprocess, sys
from pathlib import Path

if {"-h", "--help"} & set(sys.argv[1:]):
    print(__doc__)
    sys.exit(0)
if set(sys.argv[1:]) - {"--run"}:
    print(f"error: unknown argument(s) {' '.join(sys.argv[1:])}: check_all.py takes only --run", file=sys.stderr)
    sys.exit(2)
packages = sorted(Path(__file__).resolve().parent.glob("*/check_package.py"))
if not packages:
    print("error: no package folder with a check_package.py beside check_all.py", file=sys.stderr)
    sys.exit(2)
sys.exit(max(subprocess.run([sys.executable, str(p), *sys.argv[1:]]).returncode for p in packages))
'''


def completed(store: BoardStore, wanted: str) -> list[ModelRecord]:
    done = {t.model_id for t in store.list_tasks(stage="benchmark", status="completed")}
    models = [m for m in store.list_models() if m.model_id in done]
    names = [n.strip() for n in wanted.split(",") if n.strip()]
    if not names:
        return models
    by_name = {key: m for m in models for key in (m.model_id, m.adaptation_name)}
    unknown = [n for n in names if n not in by_name]
    if unknown:
        raise ValueError(f"not a completed adaptation on the board: {', '.join(unknown)}")
    return list({by_name[n].model_id: by_name[n] for n in names}.values())


def package_stack(store: BoardStore, model: ModelRecord) -> dict[str, Any]:
    """The stack of the model's latest benchmark figures on the board."""
    ids = [m.stack_id for m in store.list_metrics(model.model_id, "benchmark") if m.stack_id]
    if not ids:
        raise ValueError(f"{model.model_id}: no benchmark figure on the board names its stack")
    return {"stack_id": ids[-1], "data": store.get_stack(ids[-1]) or {}}


def export_package(store: BoardStore, model: ModelRecord, source: Path, target: Path) -> dict[str, Any]:
    if not (source / "adaptation.json").is_file():
        raise ValueError(f"package {source} is missing (no adaptation.json)")
    if not all((source / "ab_runtime" / reader).is_file() for reader in ("metrics_file.py", "optimize/notes_file.py")):
        raise ValueError(f"{model.model_id}: its ab_runtime predates the evidence readers; re-run its adaptation stage")
    shutil.copytree(source, target, ignore=shutil.ignore_patterns(".venv", "__pycache__", "*.pyc"))
    shutil.copyfile(check_package.__file__, target / check_package.SELF)
    results = check_package.results_from_evidence(target)
    if not results:
        raise ValueError(f"{model.model_id}: no benchmark evidence (benchmark_metrics_*.json) in {source}")
    manifest = {
        "schema": "ascendbridge.export/1",
        "model_id": model.model_id,
        "adaptation": model.adaptation_name,
        "exported_at": now_iso(),
        "stack": package_stack(store, model),
        "results": results,
        "optimization": check_package.optimization_from_evidence(target),
        "files": {rel: check_package.sha256(target / rel) for rel in check_package.package_files(target)},
    }
    (target / check_package.MANIFEST).write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    return manifest


def readme(manifests: list[dict[str, Any]]) -> str:
    lines = [
        "# Adaptations",
        "",
        "Exported by AscendBridge. Every folder is self-contained: `uv sync --extra "
        "cpu|cuda|ascend` then `uv run demo.py`. `python3 check_all.py` (or a folder's `check_package.py`) "
        "re-verifies the files against `manifest.json` and the results below against the evidence.",
        "",
        "| package | model | device | dtype | median ms | samples/s | accuracy | optimization | stack |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for m in manifests:
        opt = m["optimization"]
        speed = f"{opt['speedup']:.2f}x ({opt['outcome']})" if opt and opt.get("speedup") else "-"
        for r in m["results"]:
            lines.append(
                f"| [{m['adaptation']}]({m['adaptation']}/) | `{m['model_id']}`"
                + (f" ({r['proxy']})" if r.get("proxy") else "")
                + f" | {r['device']} | {r['dtype']} | "
                f"{r['median_ms']:.3f} | {r['samples_per_s']:.1f} | {r['accuracy']} | {speed} | "
                f"`{m['stack']['stack_id']}` |"
            )
    lines += ["", "## Stacks", ""]
    for sid, data in sorted({m["stack"]["stack_id"]: m["stack"]["data"] for m in manifests}.items()):
        lines.append(f"- `{sid}`: {describe(data)}")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = OneLineParser(prog="package_adaptations.py", description=__doc__.split("\n\n")[0])
    p.add_argument("--out", type=Path, required=True, help="export directory (must not exist or be empty)")
    p.add_argument(
        "--models", default="", help="comma-separated model ids or adaptation names (default: all completed)"
    )
    p.add_argument("--zip", action="store_true", help="one zip file per package instead of a repository")
    p.add_argument("--board", type=Path)
    p.add_argument("--adaptations-dir", type=Path)
    args = p.parse_args(argv)
    out = args.out.expanduser().resolve()
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        print(f"error: {out} exists and is not an empty directory", file=sys.stderr)
        return 2
    path = (args.board or board_path()).expanduser().resolve()
    packages = (args.adaptations_dir or adaptations_dir()).expanduser().resolve()
    if not path.is_file():
        print(f"error: no board at {path}", file=sys.stderr)
        return 2
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".export-", dir=out.parent))  # promoted only when complete
    try:
        with BoardStore(path) as store:
            models = completed(store, args.models)
            if not models:
                raise ValueError("no completed adaptation on the board to export")
            manifests = [
                export_package(store, m, packages / m.adaptation_name, staging / m.adaptation_name) for m in models
            ]
        if args.zip:
            for m in manifests:
                folder = staging / m["adaptation"]
                with zipfile.ZipFile(staging / f"{m['adaptation']}.zip", "w", zipfile.ZIP_DEFLATED) as zf:
                    for file in sorted(folder.rglob("*")):
                        if file.is_file():
                            zf.write(file, Path(m["adaptation"]) / file.relative_to(folder))
                shutil.rmtree(folder)
        else:
            (staging / "README.md").write_text(readme(manifests))
            (staging / "check_all.py").write_text(CHECK_ALL)
    except (ValueError, BoardError, OSError) as exc:
        shutil.rmtree(staging, ignore_errors=True)
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if out.exists():
        out.rmdir()
    staging.replace(out)
    for m in manifests:
        print(f"{m['adaptation']}: {len(m['files'])} files, stack {m['stack']['stack_id']}")
    print(f"exported {len(manifests)} adaptation(s) to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
