"""The board_ops subcommands. Each takes parsed arguments and an Output and returns an exit code;
all board access goes through BoardStore, and all failures are raised for errors.run_guarded."""

from __future__ import annotations

import argparse
import json
import re
import signal
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ab_runtime.fileops import write_text_atomic
from ab_runtime.train.corpus import HUB_PREFIX
from ascendbridge import stable_envs
from ascendbridge.agents.history import list_runs as list_agent_runs
from ascendbridge.board import (
    AttemptRecord,
    BoardStore,
    EventRecord,
    ModelRecord,
    Registration,
    TaskRecord,
    validate_registration,
)
from ascendbridge.board.records import TrainingJob
from ascendbridge.board.schema import SCHEMA_VERSION
from ascendbridge.board.store import MAX_PRIORITY
from ascendbridge.cli.board_views import MODEL_FIELDS, diagnosis_summary, event_line, model_table, task_table
from ascendbridge.cli.output import Output, progress
from ascendbridge.cli_errors import EXIT_FAILURE, EXIT_OK, CliError
from ascendbridge.config import adaptations_dir
from ascendbridge.discovery.config_estimate import proxy_depth_problem
from ascendbridge.package.serve_files import serve_command
from ascendbridge.registration_file import model_path, parse_registration_file
from ascendbridge.stages import STAGES, check_stage
from ascendbridge.workers.heartbeat import progress_text

AGENT_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:@-]{0,127}$")


def open_store(args: argparse.Namespace, read_only: bool = False) -> BoardStore:
    """The board for one command; reading commands open it read-only, so they work on a board
    they cannot write (a read-only mount, another user's file) and never write into it."""
    return BoardStore(Path(args.board), read_only=read_only)


# ---------------------------------------------------------------------------- board
def cmd_init(args: argparse.Namespace, out: Output) -> int:
    path = Path(args.board)
    existed = path.exists() and path.stat().st_size > 0
    with BoardStore.init(path):
        pass
    if out.json_mode:
        out.json({"board": str(path), "created": not existed, "schema_version": SCHEMA_VERSION})
    elif existed:
        out.line(f"board {path} is ready (existing board kept, schema version {SCHEMA_VERSION})")
    else:
        out.line(f"created board {path} (schema version {SCHEMA_VERSION})")
    return EXIT_OK


# ---------------------------------------------------------------------------- registration
def _report_registrations(out: Output, results: list[tuple[ModelRecord, bool]]) -> None:
    if out.json_mode:
        out.json(
            [
                {"model_id": r.model_id, "adaptation_name": r.adaptation_name, "created": created}
                for r, created in results
            ]
        )
        return
    for record, created in results:
        if created:
            out.line(f"registered {record.model_id} as {record.adaptation_name}")
        else:
            out.line(f"{record.model_id} is already registered (as {record.adaptation_name}); left unchanged")


def _training_job(args: argparse.Namespace) -> TrainingJob | None:
    """The job of --train-data / --train-method / --train-steps / --train-processes (a file as an
    absolute path, an `hf:` dataset reference as given), or None."""
    if args.train_data is None:
        if args.train_method is not None or args.train_steps is not None or args.train_processes is not None:
            raise CliError("--train-method, --train-steps and --train-processes need --train-data")
        return None
    data = (
        args.train_data
        if args.train_data.startswith(HUB_PREFIX)
        else str(Path(args.train_data).expanduser().absolute())
    )
    return TrainingJob(
        data=data,
        method=args.train_method or "full",
        steps=30 if args.train_steps is None else args.train_steps,
        processes=1 if args.train_processes is None else args.train_processes,
    )


def _check_local_depths(regs: list[Registration]) -> None:
    """A local model's proxy depth against its config.json now, not at discovery (which checks every
    source: a Hub model's config is read there)."""
    for reg in regs:
        config = Path(reg.path or "") / "config.json"
        if reg.proxy_depth is None or reg.source != "local" or not config.is_file():
            continue
        try:
            cfg = json.loads(config.read_text())
        except (OSError, ValueError):
            continue  # discovery names what is wrong with the config
        if problem := proxy_depth_problem(reg.proxy_depth, cfg if isinstance(cfg, dict) else {}):
            raise CliError(f"model '{reg.model_id}': {problem}")


def cmd_register_model(args: argparse.Namespace, out: Output) -> int:
    try:
        path = model_path(args.path, Path.cwd(), args.source) if args.path else None
    except ValueError as exc:
        raise CliError(f"--path: {exc}") from None
    reg = Registration(
        model_id=args.model_id,
        source=args.source,
        url=args.url,
        path=path,
        revision=args.revision,
        description=args.description or "",
        priority=args.priority,
        allow_remote_code=args.allow_remote_code,
        enable_stages=args.enable_stages,
        training=_training_job(args),
        proxy_depth=args.proxy_depth,
    )
    validate_registration(reg)  # before opening: a bad id must not even create WAL files
    _check_local_depths([reg])
    with open_store(args) as store:
        _report_registrations(out, store.register_models([reg]))
    return EXIT_OK


def cmd_register_many(args: argparse.Namespace, out: Output) -> int:
    try:
        regs = parse_registration_file(Path(args.file))
    except ValueError as exc:
        raise CliError(str(exc)) from None
    _check_local_depths(regs)
    with open_store(args) as store:
        if len(regs) >= 1000:
            progress(f"registering {len(regs)} models from {args.file} ...")
        results = store.register_models(regs)
    if out.json_mode:
        _report_registrations(out, results)
        return EXIT_OK
    created = sum(1 for _, c in results if c)
    if len(results) <= 50:
        _report_registrations(out, results)
    out.line(f"{created} registered, {len(results) - created} already registered")
    return EXIT_OK


# ---------------------------------------------------------------------------- listing
def cmd_list_models(args: argparse.Namespace, out: Output) -> int:
    with open_store(args, read_only=True) as store:
        models = store.list_models()
        statuses = store.stage_statuses()
    if out.json_mode:
        out.json([{**m.model_dump(), "stages": statuses.get(m.model_id, {})} for m in models])
    else:
        model_table(out, models, statuses)
    return EXIT_OK


def make_list_tasks(stage: str) -> Callable[[argparse.Namespace, Output], int]:
    """One `list_<stage>_tasks` handler per stage, so each stage has its own subcommand."""

    def cmd(args: argparse.Namespace, out: Output) -> int:
        with open_store(args, read_only=True) as store:
            tasks = store.list_tasks(stage=stage, status=args.status)
        if out.json_mode:
            out.json([t.model_dump() for t in tasks])
        else:
            suffix = f" ({args.status})" if args.status else ""
            task_table(out, f"{stage} tasks{suffix}", tasks)
        return EXIT_OK

    return cmd


def running_progress(tasks: list[TaskRecord], attempts: list[tuple[str, AttemptRecord]]) -> dict[str, str]:
    """Stage -> its running attempt's last progress line and age (docs/teamlead.md, "Progress on long work")."""
    running = {t.stage for t in tasks if t.status == "in_progress"}
    return {
        st: progress_text(Path(a.log_path)) for st, a in attempts if st in running and a.outcome is None and a.log_path
    }


def _model_fields(model: ModelRecord) -> list[tuple[str, Any]]:
    """The model's board fields, its proxy label beside its depth, then its discovered metadata."""
    data = model.model_dump()
    pairs: list[tuple[str, Any]] = [(k, data[k]) for k in MODEL_FIELDS]
    if label := model.proxy_label():
        pairs.insert(MODEL_FIELDS.index("proxy_depth") + 1, ("proxy", label))
    return pairs + [(f"metadata.{k}", v) for k, v in sorted(model.metadata.items())]


def cmd_show(args: argparse.Namespace, out: Output) -> int:
    with open_store(args, read_only=True) as store:
        model = store.get_model(args.model)
        tasks = store.list_tasks(model_id=args.model)
        attempts = store.list_attempts(args.model)
        events = list(reversed(store.list_events(model_id=args.model, limit=args.events, newest_first=True)))
        guidance = store.list_guidance(model_id=args.model, state="open")
        agent_runs = list_agent_runs(store, args.model)
        figures = store.list_metrics(model_id=args.model)  # gated figures only (complete_task writes them)
    served = any(t.stage == "serving" and t.status == "completed" for t in tasks)  # the gate passed
    command = serve_command(adaptations_dir() / model.adaptation_name) if served else None
    progress_lines = running_progress(tasks, attempts)
    if out.json_mode:
        out.json(
            {
                "model": model.model_dump(),
                "tasks": [t.model_dump() for t in tasks],
                "attempts": [{"stage": st, **a.model_dump()} for st, a in attempts],
                "events": [e.model_dump() for e in events],
                "open_guidance": [g.model_dump() for g in guidance],
                "agent_runs": agent_runs,
                "figures": [f.model_dump() for f in figures],
                "serve_command": command,
                "progress": progress_lines,
            }
        )
        return EXIT_OK
    out.fields(f"model {model.model_id}", _model_fields(model))
    label = model.proxy_label()  # every figure below is the proxy's
    out.table(
        "stages",
        ("stage", "status", "attempts", "owner", "lease expires", "started", "finished", "diagnosis"),
        (
            (
                t.stage,
                t.status,
                t.attempts,
                t.owner,
                t.lease_expires_at,
                t.started_at,
                t.finished_at,
                diagnosis_summary(t.diagnosis),
            )
            for t in tasks
        ),
        detail=("owner", "lease expires", "started"),
    )
    out.table(
        f"figures (gated; {label})" if label else "figures (gated)",
        ("stage", "name", "value", "unit", "device", "dtype", "ts"),
        ((f.stage, f.name, f.value, f.unit, f.device, f.dtype, f.ts) for f in figures),
    )
    if command:
        out.fields("serving (gated)", [("serve command", f"cd {model.adaptation_name} && {command}")])
    out.table(
        "attempts",
        ("stage", "#", "exit", "duration s", "outcome", "host", "devices", "backend", "fix", "log"),
        (
            (
                st,
                a.number,
                a.exit_code,
                a.duration_s,
                a.outcome,
                a.host,
                a.devices,
                a.agent_backend,
                a.fix_applied,
                a.log_path,
            )
            for st, a in attempts
        ),
        detail=("backend",),
    )
    if progress_lines:
        out.fields("running: last progress line", sorted(progress_lines.items()))
    out.table("recent events", ("ts", "stage", "kind", "message"), ((e.ts, e.stage, e.kind, e.message) for e in events))
    out.table("open guidance", ("id", "created", "text"), ((g.id, g.created_at, g.text) for g in guidance))
    out.table(
        "agent runs",
        ("ts", "role", "backend", "outcome", "duration s", "tokens", "files", "prompt", "detail"),
        (
            (
                r["ts"],
                r.get("role"),
                r.get("backend"),
                r.get("outcome"),
                r.get("duration_s"),
                r.get("tokens"),
                ", ".join(r.get("files_changed") or []),
                r.get("prompt_hash"),
                str(r.get("detail") or "")[:80],
            )
            for r in agent_runs
        ),
        detail=("tokens", "files", "prompt"),
    )
    return EXIT_OK


# ---------------------------------------------------------------------------- steering
def cmd_set_priority(args: argparse.Namespace, out: Output) -> int:
    if abs(args.priority) > MAX_PRIORITY:
        raise CliError(f"priority {args.priority} is out of range (-{MAX_PRIORITY}..{MAX_PRIORITY})")
    with open_store(args) as store:
        record = store.set_priority(args.model, args.priority)
    _done(out, f"{record.model_id}: priority {record.priority}", record.model_dump())
    return EXIT_OK


def cmd_retry(args: argparse.Namespace, out: Output) -> int:
    stage = check_stage(args.stage) if args.stage else None
    return _task_changed(args, out, lambda store: store.retry(args.model, stage), "is pending again")


def cmd_skip(args: argparse.Namespace, out: Output) -> int:
    check_stage(args.stage)
    return _task_changed(args, out, lambda store: store.skip(args.model, args.stage), "skipped")


def _task_changed(args: argparse.Namespace, out: Output, change: Callable[[BoardStore], TaskRecord], what: str) -> int:
    """One task's steering change on the board, reported as `MODEL: STAGE WHAT`."""
    with open_store(args) as store:
        task = change(store)
    _done(out, f"{task.model_id}: {task.stage} {what}", task.model_dump())
    return EXIT_OK


def cmd_rollback(args: argparse.Namespace, out: Output) -> int:
    check_stage(args.to)
    with open_store(args) as store:
        changed = store.rollback(args.model, args.to)
    if out.json_mode:
        out.json([t.model_dump() for t in changed])
    else:
        for task in changed:
            out.line(f"{task.model_id}: {task.stage} -> {task.status}")
    return EXIT_OK


def cmd_pause(args: argparse.Namespace, out: Output) -> int:
    paused = args.command == "pause"
    with open_store(args) as store:
        record = store.set_paused(args.model, paused)
    _done(out, f"{record.model_id}: {'paused' if paused else 'resumed'}", record.model_dump())
    return EXIT_OK


def cmd_allow_remote_code(args: argparse.Namespace, out: Output) -> int:
    with open_store(args) as store:
        record = store.set_allow_remote_code(args.model, not args.revoke)
    state = "allowed" if record.allow_remote_code else "not allowed"
    _done(out, f"{record.model_id}: remote code {state}", record.model_dump())
    return EXIT_OK


def cmd_set_depth(args: argparse.Namespace, out: Output) -> int:
    """A reduced-depth proxy (or the full depth again) for the model's next runs."""
    if (args.depth is None) == (not args.full):
        raise CliError("give a depth N or --full")
    with open_store(args) as store:
        model = store.get_model(args.model)
        _check_local_depths(
            [Registration(model_id=model.model_id, source=model.source, path=model.path, proxy_depth=args.depth)]
        )
        record = store.set_proxy_depth(args.model, args.depth)
    state = f"a proxy of {record.proxy_depth} layer(s)" if record.proxy_depth else "the full depth"
    _done(
        out,
        f"{record.model_id}: {state} from its next discovery (`board_ops.py rollback {record.model_id} --to discovery`)",
        record.model_dump(),
    )
    return EXIT_OK


def cmd_set_env(args: argparse.Namespace, out: Output) -> int:
    """Per-model environment mode (wins over the team-lead run's --env)."""
    mode = "" if args.env == "default" else args.env
    python = str(Path(args.python).expanduser().absolute()) if args.python else None
    with open_store(args) as store:
        record = store.set_env_mode(args.model, mode, python)
    _done(
        out,
        f"{record.model_id}: environment {record.env_mode or 'run default'}"
        + (f" on {record.env_python}" if record.env_python else ""),
        record.model_dump(),
    )
    return EXIT_OK


def cmd_guide(args: argparse.Namespace, out: Output) -> int:
    words = list(args.words)
    model = None if args.all else words.pop(0)
    text = " ".join(words).strip()
    if not text:
        raise CliError('guide needs a text: guide MODEL "text" or guide --all "text"')
    with open_store(args) as store:
        record = store.add_guidance(text, model_id=model)
    _done(
        out,
        f"guidance #{record.id} recorded for {model or 'all models'} (open until the team lead answers)",
        record.model_dump(),
    )
    return EXIT_OK


def _done(out: Output, message: str, data: dict[str, Any]) -> None:
    if out.json_mode:
        out.json(data)
    else:
        out.line(message)


# ---------------------------------------------------------------------------- agents
def cmd_heartbeat(args: argparse.Namespace, out: Output) -> int:
    if not AGENT_ID_RE.match(args.agent_id):
        raise CliError(f"agent id '{args.agent_id}' must be 1-128 characters of [A-Za-z0-9._:@-]")
    if args.role is not None and not AGENT_ID_RE.match(args.role):
        raise CliError(f"role '{args.role}' must be 1-128 characters of [A-Za-z0-9._:@-]")
    with open_store(args) as store:
        known = {a.id: a for a in store.list_agents()}.get(args.agent_id)
        if known is None or (args.role is not None and args.role != known.role) or known.status != "running":
            role = args.role or (known.role if known else None)
            if role is None:
                raise CliError(f"agent '{args.agent_id}' is new: give its --role")
            record = store.register_agent(args.agent_id, role, pid=args.pid)
            verb = "registered"
        else:
            record = store.agent_heartbeat(args.agent_id, current_task_id=args.task_id)
            verb = "heartbeat"
    _done(out, f"{verb} agent {record.id} ({record.role}) at {record.last_heartbeat}", record.model_dump())
    return EXIT_OK


def cmd_list_agents(args: argparse.Namespace, out: Output) -> int:
    with open_store(args, read_only=True) as store:
        agents = store.list_agents()
    if out.json_mode:
        out.json([a.model_dump() for a in agents])
    else:
        out.table(
            "agents",
            ("id", "role", "status", "pid", "host", "task", "last heartbeat", "started"),
            (
                (a.id, a.role, a.status, a.pid, a.host, a.current_task_id, a.last_heartbeat, a.started_at)
                for a in agents
            ),
            detail=("pid", "host", "started"),
        )
    return EXIT_OK


def cmd_cleanup(args: argparse.Namespace, out: Output) -> int:
    if args.stale_after <= 0:
        raise CliError("--stale-after must be a positive number of seconds")
    with open_store(args) as store:
        stale = store.cleanup_stale_agents(args.stale_after)
        reclaimed = store.reclaim_expired(origin="cli")
    if out.json_mode:
        out.json(
            {"stale_agents": [a.model_dump() for a in stale], "expired_leases": [t.model_dump() for t in reclaimed]}
        )
        return EXIT_OK
    for agent in stale:
        out.line(f"agent {agent.id} ({agent.role}) is stale: last heartbeat {agent.last_heartbeat}")
    for task in reclaimed:
        out.line(f"{task.model_id}: {task.stage} lease expired, back to pending")
    out.line(f"{len(stale)} stale agent(s) marked, {len(reclaimed)} expired lease(s) returned to pending")
    return EXIT_OK


def cmd_prune_envs(args: argparse.Namespace, out: Output) -> int:
    """Stable environments accumulate, one per lock (ascendbridge/stable_envs.py): disk is the only
    cost of keeping one, a sync the only cost of removing one still wanted."""
    if args.days < 0:
        raise CliError("--days must be zero or more")
    removed = stable_envs.prune(args.days, dry_run=args.dry_run)
    if out.json_mode:
        out.json({"root": str(stable_envs.root()), "removed": [str(p) for p in removed], "dry_run": args.dry_run})
        return EXIT_OK
    for env in removed:
        out.line(f"{'would remove' if args.dry_run else 'removed'} {env}")
    out.line(f"{len(removed)} environment(s) unused for {args.days:g} day(s) under {stable_envs.root()}")
    return EXIT_OK


# ---------------------------------------------------------------------------- events, export
def cmd_events(args: argparse.Namespace, out: Output) -> int:
    if args.limit <= 0:
        raise CliError("--limit must be a positive number")
    if args.interval <= 0:
        raise CliError("--interval must be a positive number of seconds")
    with open_store(args, read_only=True) as store:
        events = list(reversed(store.list_events(model_id=args.model, limit=args.limit, newest_first=True)))
        if not args.follow:
            if out.json_mode:
                out.json([e.model_dump() for e in events])
            else:
                for event in events:
                    out.line(event_line(event))
            return EXIT_OK
        return _follow(store, args, out, events)


def _follow(store: BoardStore, args: argparse.Namespace, out: Output, backlog: list[EventRecord]) -> int:
    """Print the backlog, then poll for new events until SIGINT/SIGTERM (a normal way to stop).

    The signals only set a flag that the wait between polls sees: a KeyboardInterrupt raised inside
    the database driver or the connection pool could leave a lock held and hang the exit."""
    stop = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stop.set())
    last_id = 0
    while True:
        for event in backlog:
            if out.json_mode:
                out.json_line(event.model_dump())
            else:
                out.line(event_line(event))
            last_id = event.id
        if stop.wait(args.interval):
            return EXIT_OK
        backlog = store.list_events(model_id=args.model, after_id=last_id, limit=1000)


def cmd_export(args: argparse.Namespace, out: Output) -> int:
    with open_store(args, read_only=True) as store:
        data = store.export()
    if not args.output:
        out.json(data)
        return EXIT_OK
    target = Path(args.output)
    directory = target.parent if str(target.parent) else Path(".")
    if not directory.is_dir():
        raise CliError(f"cannot write {target}: directory {directory} does not exist", EXIT_FAILURE)
    try:  # a reader never sees a half-written export
        write_text_atomic(target, json.dumps(data, indent=2, default=str) + "\n")
    except OSError as exc:
        raise CliError(f"cannot write {target}: directory {directory}: {exc.strerror}", EXIT_FAILURE) from None
    counts = f"{len(data['models'])} models, {len(data['tasks'])} tasks, {len(data['events'])} events"
    _done(out, f"exported {counts} to {target}", {"output": str(target), "models": len(data["models"])})
    return EXIT_OK


LIST_TASK_COMMANDS = {f"list_{stage}_tasks": stage for stage in STAGES}
