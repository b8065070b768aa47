"""Executors: where a stage's run and gate execute for one claimed task.

The team lead hands an executor a `Job` (the task and model records it claimed plus the adaptation
directory) and gets back a `JobResult` (what the run proposed, what the gate found, as validated
`StageOutcome` / `GateResult` models). A worker process gets its part of the job as a `WorkerJob`
file (ascendbridge.workers.payload) and never reads the board. Nothing else crosses the boundary,
so a distributed executor (Ray, a cluster queue) can replace the local one without changing
stages or the scheduler.
"""

from __future__ import annotations

import os
import queue
import shlex
import subprocess
import sys
import threading
import time
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, TypeVar

from ab_runtime.progress import PROGRESS_FILE_ENV
from ascendbridge.board.records import ModelRecord, TaskRecord
from ascendbridge.stage_api import GateResult, StageOutcome
from ascendbridge.stage_registry import EXTRA_STAGES_ENV, StageRef
from ascendbridge.workers import attempt_dir, payload
from ascendbridge.workers.containment import ATTEMPT_ENV, TEAM_LEAD_PID_ENV, AttemptMarker, kill_attempt, marker_for
from ascendbridge.workers.heartbeat import heartbeat_path
from ascendbridge.workers.placement import CPU_AFFINITY_ENV, NPU_INDEX_ENV, Placement
from ascendbridge.workers.process import kill_group, run_command


@dataclass
class Job(payload.OnTask):
    """One attempt of one stage for one model, as claimed on the board."""

    task: TaskRecord  # the board record (model id, adaptation name, token, attempt)
    model: ModelRecord  # its model's record: the worker gets both from the team lead, not the board
    ref: StageRef
    worker_id: str
    adaptation_dir: Path
    board_path: Path
    log_path: Path
    timeout_s: float
    gate_timeout_s: float
    lease_s: float
    heartbeat_s: float
    output_cap: int
    settings: dict[str, Any] = field(default_factory=dict)  # the team lead's settings (ascendbridge.settings payload)
    directives: list[dict[str, Any]] = field(default_factory=list)  # open directives for this stage (guidance)
    extra_stages: str = ""  # ASCENDBRIDGE_EXTRA_STAGES for the worker (registry outside entry points)
    env: dict[str, str] = field(default_factory=dict)  # extra environment of the worker (Ray: the head's settings)
    placement: Placement | None = None  # its devices / cores and the environment that says so
    # 0: the stage's run, then its gate. N > 0: the N-th gate re-check of an attempt whose gate was
    # inconclusive: only the gate, on the attempt's kept staging copy (same token, same log).
    recheck: int = 0

    @property
    def stage(self) -> str:
        return self.task.stage

    @property
    def gate_only(self) -> bool:
        return self.recheck > 0

    @property
    def what(self) -> str:
        """How logs name it: `attempt N`, or `gate re-check K of attempt N`."""
        return (
            f"gate re-check {self.recheck} of attempt {self.attempt}" if self.gate_only else f"attempt {self.attempt}"
        )

    @property
    def work_dir(self) -> Path:
        """The attempt's staging copy of `adaptation_dir`: where its run and gate work."""
        return attempt_dir.staging_dir(self.adaptation_dir, self.stage, self.token)

    @property
    def marker(self) -> AttemptMarker:
        return marker_for(self.board_path, self.task.id, self.token)

    def worker_job(self, phase: payload.Phase) -> payload.WorkerJob:
        """What the worker of `phase` gets: everything it needs, so it never reads the board."""
        return payload.WorkerJob(
            phase=phase,
            stage=self.stage,
            task=self.task,
            model=self.model,
            worker_id=self.worker_id,
            adaptation_dir=self.work_dir,
            result=self.result_path(phase),
            board=self.board_path,
            settings=self.settings,
            directives=self.directives,
        )

    def worker_argv(self, phase: str) -> list[str]:
        return [sys.executable, "-m", "ascendbridge.workers.worker", "--job", str(self.job_path(phase))]

    def command(self) -> str:
        return shlex.join(self.worker_argv("gate" if self.gate_only else "run"))

    def job_path(self, phase: str) -> Path:
        return self.log_path.with_name(f"{self.log_path.stem}.{phase}.job.json")

    def result_path(self, phase: str) -> Path:
        return self.log_path.with_name(f"{self.log_path.stem}.{phase}.json")

    @property
    def progress_path(self) -> Path:
        """Where its model code writes its last progress line (ascendbridge/workers/heartbeat.py)."""
        return heartbeat_path(self.log_path)


PhaseData = TypeVar("PhaseData", StageOutcome, GateResult)


@dataclass
class PhaseResult(Generic[PhaseData]):
    """How one worker process (run or gate) ended; `data` is its validated result file, if it wrote
    one; `refused` says in one line why a result file it wrote was not accepted."""

    exit_code: int | None
    duration_s: float
    timed_out: bool
    data: PhaseData | None
    log_tail: str = ""
    refused: str = ""
    memory: str | None = None  # why the worker itself is judged to have died for memory (workers/oom.py)


@dataclass
class JobResult:
    job: Job
    run: PhaseResult[StageOutcome] | None = None
    gate: PhaseResult[GateResult] | None = None
    stopped: bool = False  # the executor was shut down before the job finished
    duration_s: float = 0.0
    lost: str = ""  # why the host running it went away mid-job (Ray): the task goes back to pending
    placement: dict[str, Any] = field(default_factory=dict)  # where it ran (host, devices), for the event log
    phases: dict[str, float] = field(default_factory=dict)  # the executor's own (staging), seconds


class Executor(ABC):
    """Runs jobs concurrently; the team lead polls `collect` for finished ones."""

    @abstractmethod
    def submit(self, job: Job) -> None: ...

    @abstractmethod
    def collect(self, timeout_s: float) -> list[JobResult]:
        """Finished jobs; waits up to `timeout_s` for the first one."""

    @abstractmethod
    def in_flight(self) -> int: ...

    @abstractmethod
    def cancel(self, job: Job) -> None:
        """Stop one running job (its lease was lost); its result comes back through `collect`."""

    @abstractmethod
    def stop(self) -> None:
        """Stop every running job; their results come back through `collect` with stopped=True."""

    def close(self) -> None:  # noqa: B027  (a default no-op: only an executor holding something overrides it)
        """Release what the executor holds (a cluster connection); called once the team lead is done."""


class LocalProcessExecutor(Executor):
    """One thread per job driving two contained subprocesses: the worker's run, then its gate.

    Each worker leads a new session and carries the attempt's marker; a stop kills its group
    and every process with that marker."""

    def __init__(self) -> None:
        self._done: queue.Queue[JobResult] = queue.Queue()
        self._lock = threading.Lock()
        self._procs: dict[int, tuple[subprocess.Popen[bytes], AttemptMarker]] = {}  # task id -> live worker
        self._count = 0
        self._stopping = threading.Event()
        self._cancelled: set[tuple[int, int]] = set()  # (task id, token) of lost leases: no further phase starts

    def submit(self, job: Job) -> None:
        with self._lock:
            self._count += 1
        threading.Thread(target=self._drive, args=(job,), daemon=True, name=f"job-{job.task.id}").start()

    def in_flight(self) -> int:
        with self._lock:
            return self._count

    def collect(self, timeout_s: float) -> list[JobResult]:
        out: list[JobResult] = []
        try:
            out.append(self._done.get(timeout=timeout_s) if timeout_s > 0 else self._done.get_nowait())
            while True:
                out.append(self._done.get_nowait())
        except queue.Empty:
            pass
        with self._lock:
            self._count -= len(out)
        return out

    def cancel(self, job: Job) -> None:
        with self._lock:
            self._cancelled.add((job.task.id, job.token))
            running = self._procs.get(job.task.id)
        if running is not None and running[1] == job.marker:
            _kill_job(*running)

    def stop(self) -> None:
        self._stopping.set()
        with self._lock:
            procs = list(self._procs.values())
        threads = [threading.Thread(target=_kill_job, args=(p, m)) for p, m in procs]
        for t in threads:
            t.start()
        for t in threads:
            t.join()

    def _phase(self, job: Job, phase: payload.Phase, timeout_s: float, log: Any) -> PhaseResult[Any]:
        result_path = job.result_path(phase)
        result_path.unlink(missing_ok=True)
        if phase == "run":  # a gate verdict or a heartbeat left by an earlier try of the same number is not ours
            job.result_path("gate").unlink(missing_ok=True)
            job.progress_path.unlink(missing_ok=True)
        payload.write(job.job_path(phase), job.worker_job(phase))
        env = dict(os.environ, PYTHONUNBUFFERED="1", **job.env)
        for name in (CPU_AFFINITY_ENV, NPU_INDEX_ENV):  # only this job's placement decides these
            env.pop(name, None)
        if job.placement is not None:
            env.update(job.placement.env)
        env[ATTEMPT_ENV] = str(job.marker)
        env[PROGRESS_FILE_ENV] = str(job.progress_path)
        env[TEAM_LEAD_PID_ENV] = str(os.getpid())
        if job.extra_stages:
            env[EXTRA_STAGES_ENV] = job.extra_stages

        def track(proc: subprocess.Popen[bytes]) -> None:
            with self._lock:
                self._procs[job.task.id] = (proc, job.marker)
            if self._stopping.is_set() or (job.task.id, job.token) in self._cancelled:  # raced stop() / cancel()
                _kill_job(proc, job.marker)

        log.write(f"---- {phase} (worker {job.worker_id}, timeout {timeout_s:.0f} s)\n")
        log.flush()
        res = run_command(
            job.worker_argv(phase),
            cwd=job.work_dir,
            env=env,
            timeout_s=timeout_s,
            output_cap=job.output_cap,
            log=log,
            on_start=track,
            new_session=True,
        )
        with self._lock:
            self._procs.pop(job.task.id, None)
            stopped = self._stopping.is_set() or (job.task.id, job.token) in self._cancelled
        # The worker is gone. One that was SIGKILLed cleaned up nothing: what its nested commands
        # started outside its group carries their command ids, not its own, but still the marker.
        kill_attempt(job.marker)
        data, refused = payload.read_result(result_path, phase)
        if refused:
            log.write(f"---- {refused}\n")
        memory = None if stopped else res.memory_death()  # our own stop's SIGKILL is no memory death
        return PhaseResult(res.exit_code, res.duration_s, res.timed_out, data, res.tail(30), refused, memory)

    def _drive(self, job: Job) -> None:
        start = time.monotonic()
        result = JobResult(job)
        try:
            job.log_path.parent.mkdir(parents=True, exist_ok=True)
            if not job.gate_only:
                staging = time.monotonic()
                attempt_dir.prepare(job.adaptation_dir, job.stage, job.token)
                result.phases["staging"] = time.monotonic() - staging
            elif not job.work_dir.is_dir():  # never gate a fresh copy in its place
                raise FileNotFoundError(f"the staging copy {job.work_dir} of the attempt is gone")
            with job.log_path.open("a", encoding="utf-8") as log:
                log.write(
                    f"==== {job.stage} {job.what} of {job.task.model_id} "
                    f"(task #{job.task.id}, token {job.token}) {time.strftime('%Y-%m-%dT%H:%M:%S%z')}\n"
                )
                wants_gate = True  # a re-check's run is the attempt's, done already
                if not job.gate_only:
                    result.run = self._phase(job, "run", job.timeout_s, log)
                    wants_gate = result.run.data is not None and result.run.data.status == "done"
                if wants_gate and not self._stopping.is_set() and (job.task.id, job.token) not in self._cancelled:
                    result.gate = self._phase(job, "gate", job.gate_timeout_s, log)
        except Exception as exc:  # a broken log dir must not lose the job: report it as a crash
            elapsed, why = time.monotonic() - start, f"executor error: {exc}"
            if job.gate_only:
                result.gate = PhaseResult(None, elapsed, False, None, why)
            else:
                result.run = PhaseResult(None, elapsed, False, None, why)
        result.stopped = self._stopping.is_set()
        result.duration_s = time.monotonic() - start
        self._done.put(result)


def _kill_job(proc: subprocess.Popen[bytes], marker: AttemptMarker) -> None:
    """Stop one worker: SIGTERM its group (it kills what it started), then every process that
    still carries the attempt's marker."""
    kill_group(proc.pid, 3.0, proc)
    kill_attempt(marker)
