"""One stage phase for one task, in its own process: `python -m ascendbridge.runtime.worker`.

The team lead starts this once for the stage's `run` and once more for its `gate`, so the
checker never shares a process (or monkey-patches) with the code it checks. While it works the
worker keeps the task's lease alive with its fencing token; when the token goes stale (the lease
was reclaimed) or the team lead that started it is gone, it stops everything it started: its
process group and every process carrying its attempt marker (ascendbridge.runtime.containment).
The kernel tells it at once when the team lead dies (parent-death signal, SIGTERM); the lease
keeper's parent check is the fallback for a parent that died before the signal was armed.
It writes what happened as JSON to --result and never changes task state itself: the team lead
gates every transition.

Exit codes: 0 result written and the phase succeeded (run: done or skipped; gate: passed),
1 the stage (or its import) crashed (result written with the traceback summary), 2 usage error,
3 the task was not ours to begin with (stale token), 4 result written and the phase did not
succeed (run: failed or blocked; gate: not passed), so an attempt's exit code on the board says
whether it worked, as a person reading `board_ops.py show` expects.

With --detached-context (the Ray executor, ascendbridge.runtime.ray_executor) the worker runs on a
host that cannot see the board: the model and task records come from that JSON file, the team lead
keeps the lease, and the worker never opens the board. It stops when the process that started it
(the Ray task) is gone.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import signal
import sys
import threading
import time
import traceback
from pathlib import Path
from typing import Any, Callable, Optional

from ascendbridge.board import BoardError, BoardStore, StaleTokenError
from ascendbridge.board.records import ModelRecord, TaskRecord
from ascendbridge.runtime.busy import retry_busy
from ascendbridge.runtime.containment import (ATTEMPT_ENV, TEAM_LEAD_PID_ENV, AttemptMarker, die_with_parent,
                                              kill_attempt)
from ascendbridge.runtime.placement import apply_cpu_affinity
from ascendbridge.settings import PathSettings, Settings, SettingsError, install, installed
from ascendbridge.stage_api import GateResult, StageContext, StageOutcome
from ascendbridge.teamlead.guidance import open_directives
from ascendbridge.teamlead.registry import STAGE_ROLES, load_stage, stage_refs
from ab_runtime.fileops import write_text_atomic

EXIT_OK, EXIT_CRASHED, EXIT_USAGE, EXIT_STALE, EXIT_UNSUCCESSFUL = 0, 1, 2, 3, 4
OUTCOME_STATUSES = ("done", "failed", "blocked", "skipped")


def write_json_atomic(path: Path, data: dict[str, Any]) -> None:
    write_text_atomic(path, json.dumps(data, default=str, indent=1))


def _kill_descendants() -> None:
    """Kill every other process of this attempt: by marker (any depth, in or out of our group),
    then our group (we lead it when the executor started us)."""
    marker = AttemptMarker.parse(os.environ.get(ATTEMPT_ENV, ""))
    if marker is not None:
        kill_attempt(marker)
    if os.getpgrp() == os.getpid():
        os.killpg(os.getpgrp(), signal.SIGKILL)  # what the marker missed (a scrubbed environment), and us


def _stop_group(message: str) -> None:
    """Stop this worker and everything it started."""
    print(f"[worker] {message}", flush=True)
    _kill_descendants()
    os._exit(EXIT_STALE)


_orphaned_release: list[Callable[[], None]] = []  # set by execute(): give the task back if the team lead died


def _on_sigterm(signum: int, _frame: object) -> None:
    """Timeout, shutdown or the team lead's death: nothing this attempt started may survive it.
    When the team lead died (parent-death signal) nobody else will release the task soon, so the
    worker does, after its processes are gone and before it exits."""
    print("[worker] SIGTERM: stopping everything this attempt started", flush=True)
    marker = AttemptMarker.parse(os.environ.get(ATTEMPT_ENV, ""))
    if marker is not None:
        kill_attempt(marker)
    if os.getppid() != _team_lead_pid():
        for release in _orphaned_release:
            try:
                release()
            except BoardError:
                pass
    _kill_descendants()
    os._exit(128 + signum)


def _team_lead_pid() -> int:
    raw = os.environ.get(TEAM_LEAD_PID_ENV, "")
    return int(raw) if raw.isdigit() else os.getppid()


class LeaseKeeper(threading.Thread):
    """Heartbeats the lease and the agent row; stops the worker when ownership is lost."""

    def __init__(self, store: BoardStore, args: argparse.Namespace) -> None:
        super().__init__(daemon=True, name="lease-keeper")
        self.store, self.args = store, args
        self.parent = _team_lead_pid()
        self.done = threading.Event()
        self.last_beat = time.monotonic()  # execute() has just heartbeated

    def run(self) -> None:
        a = self.args
        while not self.done.wait(min(a.heartbeat_s, 1.0)):
            if os.getppid() != self.parent:
                try:
                    self.store.release_task(a.task_id, a.token, "team lead exited", origin=a.worker_id)
                except BoardError:
                    pass
                _stop_group("team lead is gone: task released, stopping")
            if time.monotonic() - self.last_beat < a.heartbeat_s:
                continue
            try:
                self.store.heartbeat_task(a.task_id, a.token, a.lease_s)
                self.store.agent_heartbeat(a.worker_id, a.task_id)
                self.last_beat = time.monotonic()
            except StaleTokenError as exc:
                _stop_group(f"lease lost ({exc}); stopping")
            except BoardError as exc:  # busy board: try again next beat, the lease has slack
                print(f"[worker] heartbeat failed: {exc}", flush=True)


def _release_alone(args: argparse.Namespace, reason: str) -> None:
    """Release from a signal handler: its own connection, never the one the interrupted code holds."""
    with BoardStore(args.board) as own:
        own.release_task(args.task_id, args.token, reason, origin=args.worker_id)


def _context(store: Optional[BoardStore], args: argparse.Namespace) -> StageContext:
    if store is None:
        records = json.loads(Path(args.detached_context).read_text())
        task, model = TaskRecord(**records["task"]), ModelRecord(**records["model"])
        directives = list(records.get("directives") or [])
    else:
        task = store.get_task(args.task_id)
        model = store.get_model(task.model_id)
        directives = open_directives(store, model.model_id, task.stage)
    adaptation_dir = Path(args.adaptation_dir)
    adaptation_dir.mkdir(parents=True, exist_ok=True)
    settings = installed() or Settings.resolve()
    return StageContext(model=model, task=task, adaptation_dir=adaptation_dir, board_path=Path(args.board),
                        log=sys.stdout, attempt=args.attempt, settings=settings.for_stage(args.stage),
                        directives=directives)


def _crash(kind: str, exc: BaseException) -> dict[str, Any]:
    traceback.print_exc(file=sys.stdout)
    sys.stdout.flush()
    return {"rule": kind, "summary": f"{kind.replace('_', ' ')}: {type(exc).__name__}: {exc}",
            "exception": type(exc).__name__, "traceback_tail": traceback.format_exc()[-2000:]}


def _outcome_dict(value: Any) -> dict[str, Any]:
    if not isinstance(value, StageOutcome) or value.status not in OUTCOME_STATUSES:
        raise TypeError(f"run() returned {value!r}, not a StageOutcome with status in {OUTCOME_STATUSES}")
    return dataclasses.asdict(value)


def _gate_dict(value: Any) -> dict[str, Any]:
    if not isinstance(value, GateResult):
        raise TypeError(f"gate() returned {value!r}, not a GateResult")
    return dataclasses.asdict(value)


class ParentWatch(threading.Thread):
    """The detached worker's keeper: no board to heartbeat, only the parent (the Ray task) to outlive."""

    def __init__(self) -> None:
        super().__init__(daemon=True, name="parent-watch")
        self.parent = _team_lead_pid()
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.wait(1.0):
            if os.getppid() != self.parent:
                _stop_group("the Ray task that started this worker is gone, stopping")


def execute(args: argparse.Namespace) -> int:
    if args.detached_context:
        return _run_phase(args, None, ParentWatch())
    store = BoardStore(args.board)

    def board(call: Callable[[], object], what: str) -> None:  # a busy board delays, never crashes, the start
        retry_busy(call, what, lambda line: print(f"[worker] {line}", flush=True), give_up_after_s=args.lease_s / 2)

    try:
        board(lambda: store.heartbeat_task(args.task_id, args.token, args.lease_s), "the first heartbeat")
    except StaleTokenError as exc:
        print(f"[worker] not starting: {exc}", flush=True)
        return EXIT_STALE
    role = STAGE_ROLES.get(args.stage, args.stage)
    if args.phase == "run":
        board(lambda: store.register_agent(args.worker_id, role), "registering")
    board(lambda: store.agent_heartbeat(args.worker_id, args.task_id), "the agent heartbeat")
    _orphaned_release.append(lambda: _release_alone(args, "team lead exited"))
    return _run_phase(args, store, LeaseKeeper(store, args))


def _run_phase(args: argparse.Namespace, store: Optional[BoardStore], keeper: Any) -> int:
    """Run the stage's phase while `keeper` watches ownership; write the result file."""
    result_path = Path(args.result)
    keeper.start()
    print(f"[worker] {args.phase} of {args.stage} for task #{args.task_id} (token {args.token}, pid {os.getpid()})",
          flush=True)
    code = EXIT_OK
    try:
        ref = stage_refs().get(args.stage)
        if ref is None:
            raise LookupError(f"no implementation registered for stage '{args.stage}'")
        try:
            stage = load_stage(ref)
        except Exception as exc:
            data = _crash("stage_import_error", exc)
            code = EXIT_CRASHED
            payload = _failure_payload(args.phase, data)
        else:
            ctx = _context(store, args)
            try:
                if args.phase == "run":
                    payload = _outcome_dict(stage.run(ctx))
                else:
                    payload = _gate_dict(stage.gate(ctx))
            except Exception as exc:
                data = _crash("stage_crashed" if args.phase == "run" else "gate_crashed", exc)
                code = EXIT_CRASHED
                payload = _failure_payload(args.phase, data)
        write_json_atomic(result_path, payload)
        if code == EXIT_OK and not _succeeded(args.phase, payload):
            code = EXIT_UNSUCCESSFUL
    finally:
        keeper.done.set()
    keeper.join(timeout=5)
    if store is not None:
        store.close()
    return code


def _succeeded(phase: str, payload: dict[str, Any]) -> bool:
    if phase == "run":
        return payload.get("status") in ("done", "skipped")
    return payload.get("passed") is True


def _failure_payload(phase: str, diagnosis: dict[str, Any]) -> dict[str, Any]:
    if phase == "run":
        return {"status": "failed", "summary": diagnosis["summary"], "diagnosis": diagnosis, "result": {}}
    return {"passed": False, "summary": diagnosis["summary"], "report": diagnosis}


def parse_args(argv: Optional[list[str]] = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m ascendbridge.runtime.worker", description=__doc__.splitlines()[0])
    p.add_argument("--phase", choices=("run", "gate"), required=True)
    p.add_argument("--stage", required=True)
    p.add_argument("--board", required=True)
    p.add_argument("--task-id", type=int, required=True)
    p.add_argument("--token", type=int, required=True)
    p.add_argument("--worker-id", required=True)
    p.add_argument("--attempt", type=int, default=1)
    p.add_argument("--adaptation-dir", required=True)
    p.add_argument("--result", required=True)
    p.add_argument("--lease-s", type=float, default=60.0)
    p.add_argument("--heartbeat-s", type=float, default=10.0)
    p.add_argument("--settings-json", default="", help="the team lead's settings (ascendbridge.settings payload)")
    p.add_argument("--detached-context", default="",
                   help="JSON file with the model and task records: run without the board (Ray executor)")
    return p.parse_args(argv)


def main(argv: Optional[list[str]] = None) -> int:
    sys.stdout.reconfigure(line_buffering=True)  # type: ignore[attr-defined]
    args = parse_args(argv)
    try:
        apply_cpu_affinity()  # before anything starts: every process of this phase inherits the cores
    except (ValueError, OSError) as exc:
        print(f"error: cannot pin this worker to its cores: {exc}", file=sys.stderr, flush=True)
        return EXIT_USAGE
    try:  # the team lead's typed settings; hooks deep inside a stage read them (and this board) via section()
        install(Settings.from_payload(args.settings_json, paths=PathSettings.from_sources({"board": args.board})))
    except SettingsError as exc:
        print(f"error: {exc}", file=sys.stderr, flush=True)
        return EXIT_USAGE
    signal.signal(signal.SIGTERM, _on_sigterm)
    die_with_parent(signal.SIGTERM)
    try:
        return execute(args)
    except BoardError as exc:
        print(f"error: {exc}", file=sys.stderr, flush=True)
        return EXIT_CRASHED


if __name__ == "__main__":
    sys.exit(main())
