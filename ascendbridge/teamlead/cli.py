"""Command line of one team-lead run: flags, lock, logging, signals, summary, exit codes.

Exit codes (also in docs/teamlead.md):
  0  finished: nothing runnable or running is left (--once), no task failed in this run
  1  finished, but at least one task failed or was blocked in this run (see the summary)
  2  usage or configuration error
  3  board error (missing, corrupt or unwritable board)
  4  another team lead is already running on this board
  5  internal error (traceback in the team-lead log file)
  130 / 143  stopped by SIGINT / SIGTERM; running tasks were returned to pending
"""

from __future__ import annotations

import argparse
import json
import logging
import logging.handlers
import os
import signal
import sys
import time
from pathlib import Path
from typing import Literal, get_args, get_origin

from rich import box
from rich.console import Console
from rich.logging import RichHandler
from rich.table import Table

from ascendbridge.board import BoardError, BoardStore
from ascendbridge.cli_errors import OneLineParser
from ascendbridge.config import board_path, logs_dir, stage_history_path
from ascendbridge.envmode import ENV_MODES, EnvModeError, env_choice
from ascendbridge.settings import DeviceSettings, EnvsSettings, Settings, install
from ascendbridge.stage_registry import StageRef, stage_refs
from ascendbridge.stages import STATUSES
from ascendbridge.teamlead.diskspace import min_free_bytes
from ascendbridge.teamlead.guidance import BoardSteering
from ascendbridge.teamlead.history import HostHistory
from ascendbridge.teamlead.lock import InstanceLock, LockHeld
from ascendbridge.teamlead.progress import FILE_ONLY, Progress
from ascendbridge.teamlead.scheduler import RunStats, TeamLead
from ascendbridge.teamlead.settings import (
    RunSettings,
    SettingsError,
    TeamLeadSettings,
    parse_stage_map,
    parse_stage_settings,
    stages_for,
)
from ascendbridge.workers.devices import detect
from ascendbridge.workers.executor import Executor, LocalProcessExecutor
from ascendbridge.workers.placement import DevicePool, pool_entry
from ascendbridge.workers.ray_executor import RayExecutor, RayUnavailable

EXIT_OK, EXIT_FAILURES, EXIT_USAGE, EXIT_BOARD, EXIT_LOCKED, EXIT_INTERNAL = 0, 1, 2, 3, 4, 5
LOG_BACKUPS = 14  # daily files kept


def build_parser() -> argparse.ArgumentParser:
    p = OneLineParser(
        prog="run_auto_team_lead.sh",
        description="One team-lead run: move registered models "
        "through the gated stages. PROMPT_MODE=adaptation|training|benchmark|optimization|business|serving|all.",
    )
    when = p.add_mutually_exclusive_group()
    when.add_argument("--once", action="store_true", help="exit when nothing is runnable or running (default)")
    when.add_argument("--forever", action="store_true", help="keep polling for new registrations")
    p.add_argument("--board", type=Path, help="board file (default: ASCENDBRIDGE_BOARD or ./board.db)")
    p.add_argument("--stages", help="explicit stage list, e.g. discovery,adaptation (overrides PROMPT_MODE)")
    p.add_argument("--mode", help="PROMPT_MODE (default: $PROMPT_MODE or all)")
    add_run_flags(p)
    p.add_argument("--stage-workers", help="per-stage caps, e.g. adaptation=1,benchmark=1")
    p.add_argument("--attempts", type=int, help="attempt budget per stage (default 3)")
    p.add_argument("--stage-attempts", help="per-stage budgets, e.g. healing=5")
    p.add_argument("--timeout", type=float, help="wall-clock limit (s) of every stage run")
    p.add_argument("--stage-timeout", help="per-stage limits in seconds, e.g. benchmark=7200")
    p.add_argument("--output-cap", type=int, help="bytes of output kept per attempt log (default 4 MiB)")
    p.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="STAGE.KEY=VALUE",
        help="a setting of a stage or section (docs/settings.md), e.g. benchmark.iters=20; VALUE is "
        "JSON when it parses, else text; an unknown key or a bad value is refused",
    )
    p.add_argument(
        "--env",
        choices=ENV_MODES,
        help="environment mode of model runs: locked (each package's "
        "uv.lock, default) or system (layered on --python's torch/torch_npu); $ASCENDBRIDGE_ENV",
    )
    p.add_argument(
        "--python",
        type=Path,
        help="system-mode interpreter with torch (/torch_npu) preinstalled; $ASCENDBRIDGE_SYSTEM_PYTHON",
    )
    p.add_argument("--agent-id", default="team-lead", help="agent id on the board (default team-lead)")
    p.add_argument("--plain", action="store_true", help="plain log lines even on a terminal")
    return p


def add_run_flags(p: argparse.ArgumentParser) -> None:
    """A flag per RunSettings.FLAGS entry, its help the field's description with its variable and
    default: both stated once, in RunSettings. pydantic checks the value (Settings.resolve)."""
    variables = RunSettings.env_names()
    for name, flag in RunSettings.FLAGS.items():
        field = RunSettings.model_fields[name]
        variable, default = f"${variables[name]}", field.default
        value = f"{default:g}" if isinstance(default, float) else default
        shown = variable if default is None else f"{variable}, default {value}"
        choices = get_args(field.annotation) if get_origin(field.annotation) is Literal else None
        p.add_argument(flag, choices=choices, help=f"{field.description} [{shown}]")


def settings_from(args: argparse.Namespace) -> TeamLeadSettings:
    st = TeamLeadSettings()
    st.stages = stages_for(args.mode or os.environ.get("PROMPT_MODE"), args.stages)
    st.resolved = resolve_settings(args)
    run = st.resolved.of(RunSettings)
    for name in RunSettings.model_fields:
        setattr(st, name, getattr(run, name))
    st.stage_limits = parse_stage_map(args.stage_workers, "--stage-workers", int)
    st.attempt_budget = parse_stage_map(args.stage_attempts, "--stage-attempts", int)
    if args.attempts is not None:
        if args.attempts < 1:
            raise SettingsError("--attempts must be at least 1")
        st.default_attempts = args.attempts
    if args.timeout is not None:
        if args.timeout <= 0:
            raise SettingsError("--timeout must be positive")
        st.stage_timeout_s = {stage: args.timeout for stage in st.stage_timeout_s}
    st.stage_timeout_s.update(parse_stage_map(args.stage_timeout, "--stage-timeout", float))
    if args.output_cap is not None:
        if args.output_cap < 1024:
            raise SettingsError("--output-cap must be at least 1024 bytes")
        st.output_cap = args.output_cap
    st.forever = bool(args.forever)
    st.agent_id = args.agent_id
    try:
        env_choice(run=st.resolved.of(EnvsSettings))  # a bad mode or interpreter: before any model runs
    except EnvModeError as exc:
        raise SettingsError(str(exc)) from None
    return st


def resolve_settings(args: argparse.Namespace) -> Settings:
    """The one settings model, resolved once: the flags and `--set`, then ASCENDBRIDGE_*, then the
    defaults (ascendbridge.settings). Workers get it as typed settings, not through the environment."""
    given: dict[str, dict[str, object]] = parse_stage_settings(args.set)
    given["run"] = {  # each run setting's flag is named once, in RunSettings.FLAGS (argparse's dest rule)
        name: value
        for name, flag in RunSettings.FLAGS.items()
        if (value := getattr(args, flag.removeprefix("--").replace("-", "_"))) is not None
    }
    envs = {"env": args.env, "system_python": str(args.python.expanduser().absolute()) if args.python else None}
    given["envs"] = {**given.get("envs", {}), **{k: v for k, v in envs.items() if v is not None}}
    return Settings.resolve(given)


def with_pool(resolved: Settings | None, pool: DevicePool) -> Settings:
    """The settings with the team lead's device pool (discovery sizes models against these devices)."""
    resolved = resolved or Settings.resolve()
    devices = resolved.of(DeviceSettings).model_copy(update={"device_pool": json.dumps([pool_entry(pool)])})
    return resolved.replace(devices)


def make_executor(settings: TeamLeadSettings) -> Executor:
    """The local executor, or a Ray one joined to its cluster (RayUnavailable: one line for the user)."""
    if settings.executor == "ray":
        return RayExecutor(settings.ray_address)
    return LocalProcessExecutor()


def setup_logging(console: Console, live: bool) -> logging.Logger:
    log = logging.getLogger("ascendbridge.teamlead")
    log.setLevel(logging.INFO)
    log.propagate = False
    log.handlers.clear()
    folder = logs_dir() / "team-lead"
    folder.mkdir(parents=True, exist_ok=True)
    daily = logging.handlers.TimedRotatingFileHandler(
        folder / "team_lead.log", when="midnight", utc=True, backupCount=LOG_BACKUPS, encoding="utf-8"
    )
    daily.setFormatter(logging.Formatter("%(asctime)s %(levelname)s [pid %(process)d] %(message)s"))
    log.addHandler(daily)
    if live:
        screen: logging.Handler = RichHandler(console=console, show_path=False, markup=False)
    else:
        screen = logging.StreamHandler(sys.stderr)
        screen.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s", "%H:%M:%S"))
    screen.addFilter(lambda record: not getattr(record, FILE_ONLY, False))
    log.addHandler(screen)
    return log


def print_summary(console: Console, store: BoardStore, lead: TeamLead, stats: RunStats) -> None:
    table = Table(title="team-lead run summary", box=box.SIMPLE_HEAD, pad_edge=False)
    table.add_column("stage")
    for status in STATUSES:
        table.add_column(status, justify="right")
    counts = store.status_counts()
    for stage in lead.settings.stages:
        table.add_row(stage, *(str(counts.get(stage, {}).get(s, 0) or "") for s in STATUSES))
    console.print(table)
    done = ", ".join(f"{k} {v}" for k, v in sorted(stats.outcomes.items()))
    console.print(f"this run: {done or 'nothing to do'}; {time.monotonic() - stats.started:.1f} s")
    for stage, why in stats.not_runnable.items():
        console.print(f"not runnable: {stage}: {why}")


Prepared = tuple[argparse.Namespace, TeamLeadSettings, dict[str, StageRef], DevicePool]


def prepare(argv: list[str] | None) -> Prepared | int:
    """The run's arguments, settings, stages and device pool, all checked before anything starts;
    or the exit code once a usage error is printed in one line (0 for --help)."""
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as exc:  # --help, or a usage error already printed as one line
        return int(exc.code or 0)
    try:
        settings = settings_from(args)
        min_free_bytes()  # a bad ASCENDBRIDGE_MIN_FREE_MB is a usage error, before anything starts
        refs = stage_refs()
        python = settings.resolved.of(EnvsSettings).system_python if settings.resolved else None
        pool = DevicePool(
            detect(settings.devices, python=python), settings.timed_cores
        )  # DeviceSpecError: a bad --devices
    except (SettingsError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    return args, settings, refs, pool


def main(argv: list[str] | None = None) -> int:
    prepared = prepare(argv)
    if isinstance(prepared, int):
        return prepared
    args, settings, refs, pool = prepared
    settings.resolved = with_pool(settings.resolved, pool)
    install(settings.resolved)  # this process reads the settings its workers get
    try:
        return serve(args, settings, refs, pool)
    finally:
        install(None)


def serve(args: argparse.Namespace, settings: TeamLeadSettings, refs: dict[str, StageRef], pool: DevicePool) -> int:
    """Open the board, take the lock and run the team lead until done or stopped; the exit code."""
    path = (args.board or board_path()).expanduser().resolve()
    try:
        store = BoardStore(path)
    except BoardError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_BOARD
    console = Console(stderr=True)
    live = console.is_terminal and not args.plain
    try:
        log = setup_logging(console, live)
    except OSError as exc:
        print(f"error: cannot write the team-lead log under {logs_dir()}: {exc.strerror or exc}", file=sys.stderr)
        store.close()
        return EXIT_USAGE
    lock = InstanceLock(path)
    try:
        lock.acquire()
    except LockHeld as exc:
        print(f"error: {exc}", file=sys.stderr)
        store.close()
        return EXIT_LOCKED
    try:
        executor = make_executor(settings)
        if isinstance(executor, RayExecutor):  # the cluster's devices, not this host's, bound timed tasks
            pool = DevicePool(executor.inventory(), lend=False)  # Ray places preparation, not this pool
    except RayUnavailable as exc:
        print(f"error: {exc}", file=sys.stderr)
        lock.release()
        store.close()
        return EXIT_USAGE
    received: list[int] = []
    try:
        with Progress(
            console, log, live, store.costed_attempts, HostHistory(stage_history_path(), store.path)
        ) as progress:
            lead = TeamLead(
                store,
                settings,
                executor,
                refs,
                log,
                on_tick=progress,
                pool=pool,
                steering=BoardSteering(store, log.info),
                costs=progress.costs,
            )

            def on_signal(signum: int, _frame: object) -> None:
                if not received:
                    log.info("%s received: stopping dispatch, stopping workers", signal.Signals(signum).name)
                received.append(signum)
                lead.stop_requested.set()

            signal.signal(signal.SIGTERM, on_signal)
            signal.signal(signal.SIGINT, on_signal)
            stats = lead.run()
            progress(lead, force=True)
        # Wide enough for stage x status (100+ columns), never narrower than the terminal.
        print_summary(Console(width=max(Console().width, 110)), store, lead, stats)
    except BoardError as exc:  # corrupt, full, unwritable: one line here, the traceback in the log file
        log.error("board error", exc_info=True, extra={FILE_ONLY: True})
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_BOARD
    except Exception as exc:
        log.exception("internal error")
        print(
            f"error: internal error: {type(exc).__name__}: {exc} (traceback in {logs_dir() / 'team-lead'})",
            file=sys.stderr,
        )
        return EXIT_INTERNAL
    finally:
        executor.close()
        lock.release()
        store.close()
    if lead.short_of_space:
        print(f"error: {lead.short_of_space}", file=sys.stderr)
        return EXIT_BOARD
    if received:
        return 128 + received[0]
    return EXIT_FAILURES if stats.outcomes["failed"] or stats.outcomes["blocked"] else EXIT_OK
