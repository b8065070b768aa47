"""One stage phase for one task, in its own process: `python -m ascendbridge.workers.worker --job FILE`.

The team lead starts this once for the stage's `run` and once more for its `gate`, so the
checker never shares a process (or monkey-patches) with the code it checks. The job file is a
`WorkerJob` (ascendbridge.workers.payload): the task and model records the team lead claimed,
the stage, the attempt's staging copy and the settings; the worker never opens the board to
learn them, and never writes it. The team lead alone keeps the lease: it heartbeats it, and
when the lease is lost it stops the attempt (the executor's `cancel`). When the process that
started this worker is gone (the team lead, or the Ray task on a node) the worker stops
everything it started: its process group and every process carrying its attempt marker
(ascendbridge.workers.containment). The kernel tells it at once (parent-death signal, SIGTERM);
a parent check every second is the fallback for a parent that died before the signal was armed.
It writes what happened to the job's result file as a `StageOutcome` / `GateResult` (JSON,
validated before it is written); the team lead gates every transition. Agent-history events a
stage records (ascendbridge.stage_events) travel in the outcome.

Exit codes: 0 result written and the phase succeeded (run: done or skipped; gate: passed),
1 the stage (or its import) crashed (result written with the traceback summary), 2 usage error
(a missing or malformed job file: one line), 3 the process that started it is gone, 4 result
written and the phase did not succeed (run: failed or blocked; gate: not passed), so an attempt's
exit code on the board says whether it worked, as a person reading `board_ops.py show` expects.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import signal
import sys
import threading
import traceback
from pathlib import Path
from typing import Any

from ab_runtime import phases
from ascendbridge import stage_events
from ascendbridge.settings import PathSettings, Settings, SettingsError, install, installed
from ascendbridge.stage_api import GateResult, StageContext, StageOutcome
from ascendbridge.stage_registry import load_stage, stage_refs
from ascendbridge.workers import oom
from ascendbridge.workers.containment import (
    ATTEMPT_ENV,
    TEAM_LEAD_PID_ENV,
    AttemptMarker,
    die_with_parent,
    kill_attempt,
)
from ascendbridge.workers.cost import process_cost
from ascendbridge.workers.payload import PayloadError, Phase, PhaseData, WorkerJob, checked, load, result_model, write
from ascendbridge.workers.placement import apply_cpu_affinity

EXIT_OK, EXIT_CRASHED, EXIT_USAGE, EXIT_PARENT_GONE, EXIT_UNSUCCESSFUL = 0, 1, 2, 3, 4


_stopping = False


def _kill_descendants() -> None:
    """Kill every other process of this attempt: by marker (any depth, in or out of our group),
    then our group (we lead it when the executor started us)."""
    marker = AttemptMarker.parse(os.environ.get(ATTEMPT_ENV, ""))
    if marker is not None:
        kill_attempt(marker)
    if os.getpgrp() == os.getpid():
        os.killpg(os.getpgrp(), signal.SIGKILL)  # what the marker missed (a scrubbed environment), and us


def _stop(message: str, code: int) -> None:
    """Say why, kill everything this attempt started, exit. Once: the parent-death signal comes once
    per thread of the dying team lead, and a nested call must not cut the first one's sweep short.
    The saying may fail: our stdout is a pipe to the team lead, closed when it died."""
    global _stopping
    if _stopping:
        return
    _stopping = True
    try:
        print(f"[worker] {message}", flush=True)
    except OSError:
        pass
    _kill_descendants()
    os._exit(code)


def _on_sigterm(signum: int, _frame: object) -> None:
    """Timeout, shutdown, a lost lease or the team lead's death: nothing this attempt started may
    survive it. The task itself is the team lead's (or, when it died, its successor's) to release."""
    _stop("SIGTERM: stopping everything this attempt started", 128 + signum)


def _team_lead_pid() -> int:
    raw = os.environ.get(TEAM_LEAD_PID_ENV, "")
    return int(raw) if raw.isdigit() else os.getppid()


class ParentWatch(threading.Thread):
    """Stops the worker when the process that started it (team lead or Ray task) is gone."""

    def __init__(self) -> None:
        super().__init__(daemon=True, name="parent-watch")
        self.parent = _team_lead_pid()
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.wait(1.0):
            if os.getppid() != self.parent:
                _stop("the process that started this worker is gone, stopping", EXIT_PARENT_GONE)


def _context(job: WorkerJob) -> StageContext:
    job.adaptation_dir.mkdir(parents=True, exist_ok=True)
    settings = (installed() or Settings.resolve()).for_stage(job.stage)
    return StageContext(
        model=job.model,
        task=job.task,
        adaptation_dir=job.adaptation_dir,
        board_path=job.board,
        log=sys.stdout,
        attempt=job.attempt,
        settings=settings,
        directives=job.directives,
    )


def _crash(kind: str, exc: BaseException) -> dict[str, Any]:
    traceback.print_exc(file=sys.stdout)
    sys.stdout.flush()
    crashed = {
        "rule": kind,
        "summary": f"{kind.replace('_', ' ')}: {type(exc).__name__}: {exc}",
        "exception": type(exc).__name__,
        "traceback_tail": traceback.format_exc()[-2000:],
    }
    if isinstance(exc, MemoryError):  # Python's allocator gave up in the stage's own process
        return oom.diagnosis(crashed, {"command": "the stage's worker", "evidence": "MemoryError"})
    return crashed


def _memory_death(outcome: StageOutcome) -> None:
    """A failed run whose last contained command died for memory fails as `out_of_memory` (oom.py)."""
    death = oom.take_last()
    if death is not None and outcome.status == "failed":
        outcome.diagnosis = oom.diagnosis(outcome.diagnosis or {"summary": outcome.summary}, death)


def _failure(phase: Phase, diagnosis: dict[str, Any]) -> PhaseData:
    if phase == "run":
        return StageOutcome("failed", diagnosis["summary"], diagnosis=diagnosis)
    return GateResult(False, diagnosis["summary"], diagnosis)


def execute(job: WorkerJob) -> int:
    """Run the job's phase while the parent watch runs; write the result file with the process's
    cost (its phases and peak memory, ascendbridge/workers/cost.py)."""
    phases.process_started()
    keeper = ParentWatch()
    keeper.start()
    print(
        f"[worker] {job.phase} of {job.stage} for task #{job.task.id} (token {job.token}, pid {os.getpid()})",
        flush=True,
    )
    code = EXIT_OK
    try:
        ref = stage_refs().get(job.stage)
        if ref is None:
            raise LookupError(f"no implementation registered for stage '{job.stage}'")
        try:
            stage = load_stage(ref)
        except Exception as exc:
            code, payload = EXIT_CRASHED, _failure(job.phase, _crash("stage_import_error", exc))
        else:
            ctx = _context(job)
            try:
                answer = stage.run(ctx) if job.phase == "run" else stage.gate(ctx)
                payload = checked(result_model(job.phase), answer, f"what {job.phase}() returned")
            except Exception as exc:
                rule = "stage_crashed" if job.phase == "run" else "gate_crashed"
                code, payload = EXIT_CRASHED, _failure(job.phase, _crash(rule, exc))
        if isinstance(payload, StageOutcome):  # what the agents did, even in a crashed run
            payload.events = [*payload.events, *stage_events.take_events()]
            _memory_death(payload)
        payload.cost = process_cost()
        write(job.result, payload)
        if code == EXIT_OK and not payload.succeeded:
            code = EXIT_UNSUCCESSFUL
    finally:
        keeper.done.set()
    keeper.join(timeout=5)
    return code


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m ascendbridge.workers.worker", description=__doc__.splitlines()[0])
    p.add_argument("--job", required=True, type=Path, help="the WorkerJob JSON file the team lead wrote")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    if isinstance(sys.stdout, io.TextIOWrapper):  # not when a caller swapped stdout for a plain stream
        sys.stdout.reconfigure(line_buffering=True)
    args = parse_args(argv)
    try:
        job = load(WorkerJob, args.job, "the job file")
    except PayloadError as exc:
        print(f"error: {exc}", file=sys.stderr, flush=True)
        return EXIT_USAGE
    try:
        apply_cpu_affinity()  # before anything starts: every process of this phase inherits the cores
    except (ValueError, OSError) as exc:
        print(f"error: cannot pin this worker to its cores: {exc}", file=sys.stderr, flush=True)
        return EXIT_USAGE
    try:  # the team lead's typed settings; hooks deep inside a stage read them (and this board) via section()
        install(Settings.from_payload(json.dumps(job.settings), paths=PathSettings.from_sources({"board": job.board})))
    except SettingsError as exc:
        print(f"error: {exc}", file=sys.stderr, flush=True)
        return EXIT_USAGE
    signal.signal(signal.SIGTERM, _on_sigterm)
    die_with_parent(signal.SIGTERM)
    return execute(job)


if __name__ == "__main__":
    sys.exit(main())
