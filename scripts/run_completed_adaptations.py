"""Re-validate completed adaptations on the current stack; report unchanged / improved / regressed / broken.

    uv run scripts/run_completed_adaptations.py [--models a,b] [--board board.db]
        [--device cpu|cuda|npu] [--env locked|system --python PATH] [--optimize]
        [--tolerance 0.05] [--iters 10] [--warmup 3] [--workers 1] [--out DIR] [--json]

Every completed adaptation (Benchmark completed on the board), or the selection, is copied to a
scratch directory (the package and its recorded evidence stay untouched) and re-run through a
team lead on a board of its own, one task per adaptation (ascendbridge/revalidation/stage.py):
healing's dry run, the benchmark and, with --optimize, the optimization, each gated. The
figures are compared with the adaptation's recorded baseline on the main board (accuracy must
pass; latency or throughput worse than the tolerance is a regression). Writes revalidation.json,
revalidation.md and revalidation.png under --out, and records one `revalidation` event per
package on the main board (the dashboard's Regressions page). Exit 0: nothing regressed or broke;
1: something did; 2: bad input.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from ascendbridge.board import BoardError, BoardStore
from ascendbridge.board.records import ModelRecord, NewEvent, Registration, now_iso
from ascendbridge.cli_errors import OneLineParser
from ascendbridge.config import adaptations_dir, board_path, logs_dir
from ascendbridge.envmode import ENV_MODE_VAR, SYSTEM_PYTHON_VAR
from ascendbridge.revalidation.compare import DEFAULT_TOLERANCE, Verdict, broken, compare, latest_figures
from ascendbridge.revalidation.report import write_report
from ascendbridge.revalidation.stage import BenchmarkSlotSettings
from ascendbridge.settings import EnvsSettings, section
from ascendbridge.stack_identity import describe
from ascendbridge.stages import STAGES

EVENT_KIND = "revalidation"
STAGE_SLOT = "benchmark"  # the re-validation board runs REVALIDATION_STAGE in this slot
STAGE_TARGET = "ascendbridge.revalidation.stage:REVALIDATION_STAGE"
TEAM_LEAD_TIMEOUT_S = 6 * 3600.0
# What the re-validation board keeps of each model's registration: where it comes from and whether
# its remote code is allowed (its priority, description and training job do not matter here).
REGISTERED_AS_BEFORE = {"model_id", "source", "url", "path", "revision", "allow_remote_code"}


def _default_device() -> str:
    """ASCENDBRIDGE_DEVICE (the device the stages' sections share); a bad value is one line, exit 2."""
    try:
        return BenchmarkSlotSettings.from_sources().device
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        raise SystemExit(2) from None


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = OneLineParser(prog="run_completed_adaptations.py", description=__doc__.split("\n\n")[0])
    p.add_argument("--board", type=Path, help="main board (default: ASCENDBRIDGE_BOARD or ./board.db)")
    p.add_argument("--adaptations-dir", type=Path, help="where the packages are (default: ./adaptations)")
    p.add_argument(
        "--models", default="", help="comma-separated model ids or adaptation names (default: all completed)"
    )
    p.add_argument("--device", default=_default_device(), choices=("cpu", "cuda", "npu"))
    p.add_argument(
        "--env", choices=("locked", "system"), help="environment mode (default: each model's, else $ASCENDBRIDGE_ENV)"
    )
    p.add_argument("--python", type=Path, help="system-mode interpreter")
    p.add_argument("--optimize", action="store_true", help="re-run the optimization too")
    p.add_argument("--tolerance", type=float, default=DEFAULT_TOLERANCE, help="regression tolerance (default 0.05)")
    p.add_argument("--iters", type=int, default=10)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--workers", type=int, default=1, help="concurrent re-validations (timed runs: 1 per device)")
    p.add_argument("--out", type=Path, help="report directory (default: logs/revalidation/<timestamp>)")
    p.add_argument("--json", action="store_true", help="print the report JSON")
    args = p.parse_args(argv)
    if not 0 < args.tolerance < 1:
        p.error("--tolerance must be between 0 and 1")
    if args.iters < 1 or args.warmup < 0 or args.workers < 1:
        p.error("--iters and --workers must be >= 1, --warmup >= 0")
    if args.env == "system" and not args.python and not section(EnvsSettings).system_python:
        p.error(f"--env system needs --python PATH (or {SYSTEM_PYTHON_VAR})")
    return args


def select(store: BoardStore, wanted: str) -> list[ModelRecord]:
    """Models whose Benchmark completed, in board order; a selection naming anything else is an error."""
    completed = {t.model_id for t in store.list_tasks(stage=STAGE_SLOT, status="completed")}
    models = [m for m in store.list_models() if m.model_id in completed]
    if not wanted:
        return models
    names = [n.strip() for n in wanted.split(",") if n.strip()]
    by_name = {key: m for m in models for key in (m.model_id, m.adaptation_name)}
    unknown = [n for n in names if n not in by_name]
    if unknown:
        raise ValueError(f"not a completed adaptation on the board: {', '.join(unknown)}")
    return list({by_name[n].model_id: by_name[n] for n in names}.values())


def _copy_package(source: Path, target: Path) -> None:
    if target.exists():
        shutil.rmtree(target)
    shutil.copytree(source, target, ignore=shutil.ignore_patterns(".venv", "__pycache__", "*.pyc"))


def prepare(models: list[ModelRecord], packages: Path, run_dir: Path) -> BoardStore:
    """The re-validation board: one model per package, only the `benchmark` slot to run."""
    run_dir.mkdir(parents=True, exist_ok=True)
    board = BoardStore.init(run_dir / "revalidation.db")
    skip = [s for s in STAGES if s != STAGE_SLOT]
    regs = [Registration(skip_stages=skip, **m.model_dump(include=REGISTERED_AS_BEFORE)) for m in models]
    for (record, _), model in zip(board.register_models(regs, origin=EVENT_KIND), models):
        board.skip(record.model_id, STAGES[0], origin=EVENT_KIND)  # the first stage is always pending
        if model.env_mode:
            board.set_env_mode(record.model_id, model.env_mode, model.env_python, origin=EVENT_KIND)
        source = packages / model.adaptation_name
        if not (source / "adaptation.json").is_file():
            raise ValueError(f"package {source} is missing (no adaptation.json)")
        _copy_package(source, run_dir / "adaptations" / record.adaptation_name)
    return board


def run_team_lead(args: argparse.Namespace, run_dir: Path, dtypes: str) -> int:
    env = {
        **os.environ,
        "ASCENDBRIDGE_EXTRA_STAGES": f"{STAGE_SLOT}={STAGE_TARGET}",
        "ASCENDBRIDGE_ADAPTATIONS": str(run_dir / "adaptations"),
        "ASCENDBRIDGE_LOGS": str(run_dir / "logs"),
    }
    if args.env:
        env[ENV_MODE_VAR] = args.env
    if args.python:
        env[SYSTEM_PYTHON_VAR] = str(args.python.expanduser().absolute())
    sets = {"device": args.device, "iters": args.iters, "warmup": args.warmup, "dtypes": dtypes}
    board = run_dir / "revalidation.db"
    argv = [sys.executable, "-m", "ascendbridge.teamlead", "--once", "--plain", "--board", str(board)]
    argv += ["--stages", STAGE_SLOT, "--workers", str(args.workers), "--attempts", "1"]
    argv += ["--set", f"revalidation.optimize={'true' if args.optimize else 'false'}"]
    for key, value in sets.items():
        argv += ["--set", f"{STAGE_SLOT}.{key}={value}"]
    with (run_dir / "team_lead.out").open("w") as out:
        done = subprocess.run(argv, env=env, stdout=out, stderr=subprocess.STDOUT, timeout=TEAM_LEAD_TIMEOUT_S)
    return done.returncode


def verdicts(main: BoardStore, board: BoardStore, models: list[ModelRecord], tolerance: float) -> list[Verdict]:
    out: list[Verdict] = []
    for model in models:
        baseline = latest_figures(main.list_metrics(model.model_id, STAGE_SLOT))
        base_stack = next((r.get("stack_id") for r in baseline.values() if r.get("stack_id")), None)
        task = next(t for t in board.list_tasks(model_id=model.model_id) if t.stage == STAGE_SLOT)
        if task.status != "completed":
            failure = (task.diagnosis or {}).get("summary") or f"re-validation task {task.status}"
            out.append(broken(model.model_id, model.adaptation_name, failure, base_stack))
            continue
        current = latest_figures(board.list_metrics(model.model_id, STAGE_SLOT))
        out.append(compare(model.model_id, model.adaptation_name, baseline, current, tolerance))
    return out


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    path = (args.board or board_path()).expanduser().resolve()
    packages = (args.adaptations_dir or adaptations_dir()).expanduser().resolve()
    if not path.is_file():
        print(f"error: no board at {path}", file=sys.stderr)
        return 2
    try:
        main_board = BoardStore(path)
    except BoardError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    try:
        models = select(main_board, args.models)
        if not models:
            raise ValueError("no completed adaptation on the board to re-validate")
        dtypes = sorted({m.dtype for model in models for m in main_board.list_metrics(model.model_id, STAGE_SLOT)})
        run_dir = (args.out or logs_dir() / "revalidation" / now_iso().replace(":", "")).expanduser().resolve()
        if run_dir.exists() and any(run_dir.iterdir()):
            raise ValueError(f"report directory {run_dir} is not empty")
        board = prepare(models, packages, run_dir)
    except (ValueError, BoardError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        main_board.close()
        return 2
    print(
        f"re-validating {len(models)} adaptation(s) through the team lead; log {run_dir / 'team_lead.out'}",
        file=sys.stderr,
    )
    code = run_team_lead(args, run_dir, ",".join(d for d in dtypes if d))
    if code >= 2:
        print(f"error: the team lead exited with {code}; see {run_dir / 'team_lead.out'}", file=sys.stderr)
        return 2
    results = verdicts(main_board, board, models, args.tolerance)
    stacks = board.list_stacks()
    current = next((v.current_stack for v in results if v.current_stack), None)
    meta: dict[str, Any] = {
        "stack_id": current,
        "stack": describe(stacks.get(current or "", {})) if current else "-",
        "stack_detail": stacks.get(current or ""),
        "tolerance": args.tolerance,
        "device": args.device,
        "optimize": args.optimize,
        "finished_at": now_iso(),
        "board": str(run_dir / "revalidation.db"),
    }
    paths = write_report(results, run_dir, meta)
    for v in results:  # recorded on the main board: the dashboard's Regressions page reads these
        data = {**v.as_dict(), "report": str(paths["json"]), "stack_detail": stacks.get(v.current_stack or "")}
        main_board.add_event(
            NewEvent(EVENT_KIND, f"{v.verdict}: {v.summary}"[:200], v.model_id, STAGE_SLOT, data, origin=EVENT_KIND)
        )
    board.close()
    main_board.close()
    for v in results:
        print(f"{v.adaptation}: {v.verdict}: {v.summary}")
    print(f"report: {paths['json']}, {paths['markdown']}, {paths['figure']}")
    if args.json:
        print(paths["json"].read_text())
    return 1 if any(v.verdict in ("regressed", "broken") for v in results) else 0


if __name__ == "__main__":
    sys.exit(main())
