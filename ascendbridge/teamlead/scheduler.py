"""The team-lead loop: reclaim, apply guidance, dispatch, collect, gate, record.

Only this loop changes task state, and only through the board's narrow `LeaseBoard` interface
with the task's fencing token: a worker proposes (its run's `StageOutcome`), the stage's gate
checks (its `GateResult`, in its own process), and the transition is recorded here, with the
agent-history events the run carried. The team lead alone keeps the leases of its jobs (workers
never open the board); when one is lost it cancels that job. A result that arrives after its
lease was reclaimed is discarded, so a task can never be completed twice.

Containment: each attempt works in a staging copy of its adaptation directory, promoted in one
rename only when its gate passed and its token is still current (ascendbridge.runtime.attempt_dir).
A team lead that starts kills whatever attempt processes a previous one left on its board,
records the results its workers had finished, and releases the rest. A task whose attempts keep
ending without an outcome fails after `max_interruptions`. A busy board is retried, never fatal.

Dispatch (ascendbridge.teamlead.selection): by readiness and resources, not by stage order. A
free timed slot takes a ready timed task first; untimed work runs beside it on the cores no
timed slot owns; finish models, the longest first (a model's next stage before a shorter
model's; its rank is the model's, whatever the stage), so no stage of any model is starved and
the longest chains do not end the run alone.

A gate that could not decide (`inconclusive`: its timing check too noisy under the host's load)
spends no attempt and does not re-run the stage: the attempt is recorded `inconclusive`, its
staging copy is kept under the task's lease, and after a backoff only the gate runs again on it
(a gate re-check, placed like a timed job), up to `gate_rechecks` times; it is promoted only when
the gate passes. A team lead that dies meanwhile leaves the task to be released at the next start
(the stage runs again; nothing half-promoted). The same error (rule and message) on two attempts
in a row ends the task with that diagnosis instead of a third try.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol

from ascendbridge.agents.history import backends_used
from ascendbridge.board import (
    AttemptEnd,
    AttemptStart,
    BoardBusyError,
    BoardError,
    ModelRecord,
    NewEvent,
    StaleTokenError,
    TaskRecord,
)
from ascendbridge.board.leases import LeaseBoard
from ascendbridge.config import adaptations_dir, logs_dir
from ascendbridge.refusals import UNLISTED_REMEDY, as_refusal, is_refusal
from ascendbridge.runtime import attempt_dir, payload
from ascendbridge.runtime.busy import retry_busy
from ascendbridge.runtime.containment import kill_board_attempts
from ascendbridge.runtime.devices import detect
from ascendbridge.runtime.executor import Executor, Job, JobResult, PhaseResult
from ascendbridge.runtime.placement import DevicePool, Placement, devices_needed, is_timed, stage_devices
from ascendbridge.settings import Settings
from ascendbridge.stage_api import GateResult, StageOutcome
from ascendbridge.stage_registry import STAGE_ROLES, StageRef, check_loadable, extra_stages_env
from ascendbridge.teamlead.diskspace import min_free_bytes, shortage
from ascendbridge.teamlead.eta import CostModel
from ascendbridge.teamlead.selection import Candidate, Resources, select
from ascendbridge.teamlead.settings import TeamLeadSettings

RECLAIM_EVERY_S = 1.0
# Pending tasks each stage offers the selection, at least: the longest model can only be served
# first if it is among them (the board ranks by priority and registration).
READY_WINDOW = 64
GUIDANCE_EVERY_S = 0.5  # people type guidance; half a second is invisible, a query per task is not


@dataclass
class RunStats:
    """What this team-lead run did (for the summary table and the exit code)."""

    started: float = field(default_factory=time.monotonic)
    outcomes: Counter[str] = field(default_factory=Counter)
    not_runnable: dict[str, str] = field(default_factory=dict)

    @property
    def dispatched(self) -> int:
        return self.outcomes["dispatched"]


@dataclass
class Recheck:
    """An attempt whose gate was inconclusive, waiting (under its lease) for its gate to run again."""

    job: Job  # the attempt's job: its task, token, staging copy and log
    outcome: StageOutcome  # what the run proposed: recorded only when a re-check passes
    done: int  # re-checks run so far
    due: float  # monotonic time of the next one


class Steering(Protocol):
    """People's guidance and the healer's directives (ascendbridge.teamlead.guidance.BoardSteering):
    the loop says when, the steering writes the board through its own interface."""

    def apply_open(self) -> int: ...

    def send_back(self, model_id: str, from_stage: str, change: dict[str, Any], origin: str) -> object: ...

    def directives(self, model_id: str, stage: str) -> list[dict[str, Any]]: ...


class TeamLead:
    def __init__(
        self,
        store: LeaseBoard,
        settings: TeamLeadSettings,
        executor: Executor,
        refs: dict[str, StageRef],
        log: logging.Logger,
        on_tick: Callable[[TeamLead], None] | None = None,
        pool: DevicePool | None = None,
        steering: Steering | None = None,
        costs: CostModel | None = None,
    ) -> None:
        self.store, self.settings, self.executor, self.refs, self.log = store, settings, executor, refs, log
        self.costs = costs or CostModel.shipped(log)  # what each model's stages cost: the longest first
        self.on_tick = on_tick
        # People's guidance and the healer's directives (ascendbridge.teamlead.guidance) steer the
        # board through their own interface; the loop only says when.
        self.steering = steering
        # Timed stages take devices (or, on a CPU-only host, core groups) from here, exclusively.
        self.pool = pool or DevicePool(detect(settings.devices), settings.timed_cores)
        self.stats = RunStats()
        self.stop_requested = threading.Event()
        self.jobs: dict[int, tuple[Job, int, int]] = {}  # task id -> (job, attempt row id, slot)
        self.free_slots = list(range(settings.workers, 0, -1))
        self.extra_stages = extra_stages_env(refs)
        # Resolved once; every worker validates this back into the model (ascendbridge.settings).
        self.worker_settings: dict[str, Any] = json.loads((settings.resolved or Settings.resolve()).payload())
        self.runnable = self._runnable_stages()
        self._last_reclaim = self._last_beat = self._last_guidance = 0.0
        self._idle: set[str] = set()  # worker agents whose job ended since the last heartbeat
        self._unrecorded: list[JobResult] = []  # finished jobs the busy board has not taken yet
        self._used: set[str] = set()  # worker agents this run has started
        self._lost: set[int] = set()  # task ids of running jobs whose lease was lost (cancelled)
        self.rechecks: dict[int, Recheck] = {}  # task id -> an inconclusive gate waiting for its re-check
        self.min_free = min_free_bytes()
        self.short_of_space: str | None = None  # why this run stopped early: too little free space

    # ------------------------------------------------------------------ setup
    def _runnable_stages(self) -> list[str]:
        runnable = []
        for stage in self.settings.stages:
            problem = check_loadable(self.refs.get(stage), stage)
            if problem is None:
                runnable.append(stage)
            else:
                self.stats.not_runnable[stage] = problem
                self.log.warning("stage %s is not runnable; its tasks stay pending: %s", stage, problem)
        return runnable

    # ------------------------------------------------------------------ loop
    def run(self) -> RunStats:
        """Loop until nothing is runnable or running (--once) or until asked to stop."""
        s = self.settings
        self.store.register_agent(s.agent_id, "team-lead")
        inventory = self.pool.inventory
        self.store.record_host_devices(inventory.host, inventory.as_rows(), inventory.source, origin=s.agent_id)
        self.log.info(
            "team lead %s: stages %s, %d worker(s), %s",
            s.agent_id,
            ",".join(s.stages),
            s.workers,
            "forever" if s.forever else "once",
        )
        self.log.info("devices: %s; %s", inventory.describe(), self.pool.describe())
        for warning in self.pool.warnings:
            self.log.warning("devices: %s", warning)
        try:
            retry_busy(self._recover, "start-up recovery", self.log.warning, stop=self.stop_requested)
            while not self.stop_requested.is_set():
                self._housekeeping()
                for result in self._take_unrecorded() + self.executor.collect(0):
                    self._finish(result)
                if self._out_of_space():
                    break
                dispatched = self._dispatch()
                if self.on_tick:
                    self.on_tick(self)
                if (
                    not s.forever
                    and dispatched == 0
                    and self.executor.in_flight() == 0
                    and not self.rechecks
                    and not self._orphans()
                ):
                    if self._apply_guidance() == 0:  # a late "retry" still counts
                        break
                    continue
                for result in self.executor.collect(s.poll_s):
                    self._finish(result)
        finally:
            self._shutdown()
        return self.stats

    def _out_of_space(self) -> bool:
        """Too little free space for the board, adaptations or logs (diskspace.py): stop now, while
        the running attempts can still be recorded as released."""
        self.short_of_space = shortage(
            {"the board": self.store.path.parent, "adaptations": adaptations_dir(), "logs": logs_dir()}, self.min_free
        )
        if self.short_of_space:
            self.log.warning("stopping: %s", self.short_of_space)
        return self.short_of_space is not None

    def _take_unrecorded(self) -> list[JobResult]:
        out, self._unrecorded = self._unrecorded, []
        return out

    # ------------------------------------------------------------------ recovery
    def _recover(self) -> None:
        """After a crash or SIGKILL of a previous team lead on this board: no process of its attempts
        survives, finished results are recorded, unfinished attempts go back to pending (counted as
        interruptions), and their staging copies are removed."""
        killed = kill_board_attempts(self.store.path)
        if killed:
            self.log.warning("killed %d process(es) left running by a previous team lead's attempts", killed)
        prefix = f"{self.settings.agent_id}.w"
        for task in self.store.list_tasks(status="in_progress"):
            if not (task.owner or "").startswith(prefix) or task.stage not in self.runnable:
                continue
            if self._adopt(task):
                continue
            try:
                self.store.release_task(
                    task.id,
                    task.fencing_token,
                    "team lead restarted; its attempt was killed",
                    origin=self.settings.agent_id,
                )
                self.log.warning(
                    "%s/%s: attempt of a previous team lead killed, back to pending", task.model_id, task.stage
                )
            except StaleTokenError:
                continue
            self._close_killed_attempts(task)
        names = {m.adaptation_name for m in self.store.list_models()}
        for path in attempt_dir.discard_all(adaptations_dir(), names):
            self.log.info("removed the staging copy %s of a dead attempt", path)

    def _close_killed_attempts(self, task: TaskRecord) -> None:
        """Close the attempt rows a dead team lead left open (it died before recording them: a
        full disk, SIGKILL) as released, so no attempt stays without an outcome."""
        for _, row in self.store.list_attempts(task.model_id, task.stage):
            if row.fencing_token == task.fencing_token and row.outcome is None:
                killed = {
                    "rule": "team_lead_restarted",
                    "summary": "its team lead died before recording it; killed at restart",
                }
                self.store.finish_attempt(row.id, AttemptEnd("released", diagnosis=killed))

    def _adopt(self, task: TaskRecord) -> bool:
        """Record a result a killed team lead's worker had finished (its result files are complete:
        the run's outcome, and the gate's verdict when the run was done). Fenced like any result."""
        rows = [
            a
            for _, a in self.store.list_attempts(task.model_id, task.stage)
            if a.fencing_token == task.fencing_token and a.outcome is None and a.log_path
        ]
        if not rows:
            return False
        log_path = rows[-1].log_path
        assert log_path is not None  # rows are filtered on it
        job = self._job(task, self.store.get_model(task.model_id), 0, Path(log_path))
        run, _ = payload.read_result(job.result_path("run"), "run")
        gate, _ = payload.read_result(job.result_path("gate"), "gate")
        if (
            not isinstance(run, StageOutcome)
            or (run.status == "done" and (not isinstance(gate, GateResult) or gate.inconclusive))
            or not job.work_dir.is_dir()
        ):
            return False  # released: the stage runs again (an inconclusive gate's re-checks died with its team lead)
        result = JobResult(
            job,
            run=PhaseResult(None, 0.0, False, run),
            gate=PhaseResult(None, 0.0, False, gate) if isinstance(gate, GateResult) else None,
        )
        outcome, diagnosis, fix = self._judge(job, result)
        end = AttemptEnd(outcome, diagnosis=diagnosis, fix_applied=fix, agent_backend=_agent_backends(result))
        self.store.finish_attempt(rows[-1].id, end)
        attempt_dir.discard(job.work_dir)
        self.log.info(
            "%s/%s: recorded the finished result of a previous team lead's attempt: %s",
            task.model_id,
            task.stage,
            outcome,
        )
        self.stats.outcomes[outcome] += 1
        return True

    def _housekeeping(self) -> None:
        try:
            self._housekeeping_once()
        except BoardBusyError as exc:  # the next tick tries again
            self.log.warning("board busy during housekeeping, retrying next tick: %s", exc)

    def _housekeeping_once(self) -> None:
        now = time.monotonic()
        if now - self._last_beat >= self.settings.heartbeat_s:
            self.store.agent_heartbeat(self.settings.agent_id, status="running")
            self._keep_leases()
            busy = {job.worker_id for job, _, _ in self.jobs.values()}
            for worker_id in self._idle - busy:
                try:
                    self.store.agent_heartbeat(worker_id, None)
                except BoardError:  # its worker died before registering: no row to update
                    pass
            self._idle.clear()
            self._last_beat = now
        if now - self._last_reclaim >= RECLAIM_EVERY_S:
            for task in self.store.reclaim_expired(origin=self.settings.agent_id):
                self.log.warning(
                    "%s/%s: lease of %s expired, back to pending",
                    task.model_id,
                    task.stage,
                    task.owner or "a lost worker",
                )
            self._last_reclaim = now
        if now - self._last_guidance >= GUIDANCE_EVERY_S:
            self._apply_guidance()
            self._last_guidance = now

    def _keep_leases(self) -> None:
        """The one heartbeat of every lease (workers never touch the board): while this team lead
        lives its jobs keep their tasks; when it dies the leases expire. A lease found lost (it ran out
        and was reclaimed) cancels its job at once: everything the attempt started is stopped, and its
        result, when it comes, is discarded as stale."""
        for job, _, _ in self.jobs.values():
            if job.task.id in self._lost:
                continue
            try:
                self.store.heartbeat_task(job.task.id, job.token, self.settings.lease_s)
                self.store.agent_heartbeat(job.worker_id, job.task.id)
            except StaleTokenError as exc:
                self.log.warning("%s/%s: lease lost (%s); stopping its attempt", job.task.model_id, job.stage, exc)
                self._lost.add(job.task.id)
                self.executor.cancel(job)
        for task_id, waiting in list(self.rechecks.items()):
            if task_id in self.jobs:  # its re-check runs: kept above
                continue
            try:
                self.store.heartbeat_task(task_id, waiting.job.token, self.settings.lease_s)
            except StaleTokenError as exc:
                self.log.warning(
                    "%s/%s: lease lost while its gate re-check waited (%s); dropped",
                    waiting.job.task.model_id,
                    waiting.job.stage,
                    exc,
                )
                self.rechecks.pop(task_id)
                attempt_dir.discard(waiting.job.work_dir)

    def _orphans(self) -> int:
        """Tasks in progress on the board that no worker of ours runs (a killed team lead's):
        --once waits for their leases to expire and runs them, instead of leaving them behind."""
        counts = self.store.status_counts()
        return sum(counts.get(stage, {}).get("in_progress", 0) for stage in self.runnable)

    def _dispatch(self) -> int:
        """Start what the selection picks (ready tasks and due gate re-checks, for the free workers and
        timed slots) until it picks nothing; returns how many tasks were started or ended at claim."""
        acted = 0
        while self.free_slots and not self.stop_requested.is_set():
            try:
                progressed = 0
                for choice in self._select():
                    if self.free_slots:
                        progressed += self._dispatch_one(choice)
            except BoardBusyError as exc:
                self.log.warning("board busy, dispatching again next tick: %s", exc)
                break
            acted += progressed
            if not progressed:
                break
        return acted

    def _select(self) -> list[Candidate]:
        """What to start now (ascendbridge.teamlead.selection). Each stage offers its first pending
        tasks by priority and registration: READY_WINDOW of them, or more where more workers and
        timed slots are free and busy (room for the ones a busy model or a sharded plan makes wait);
        the selection ranks those by the work their models have."""
        now = time.monotonic()
        window = max(READY_WINDOW, len(self.free_slots) + len(self.jobs) + self.pool.capacity)
        ready = self.store.ready_tasks(self.runnable, window)
        candidates = [
            Candidate(
                t.task_id,
                t.model_pk,
                t.stage,
                t.priority,
                stage_devices(t.stage, t.plan_devices, t.plan_tensor_parallel, t.train_processes)
                if is_timed(t.stage)
                else 1,
                work_s=self.costs.model_work_s(t.task_family, t.skip_stages),
            )
            for t in ready
        ]
        due = [r for tid, r in self.rechecks.items() if r.due <= now and tid not in self.jobs]
        candidates += [
            Candidate(
                r.job.task.id,
                r.job.task.model_pk,
                r.job.stage,
                r.job.task.priority,
                self._devices(r.job.stage, r.job.model),
                recheck=True,
                work_s=self.costs.model_work_s(r.job.model.task_family, r.job.model.skip_stages),
            )
            for r in due
        ]
        waiting = sum(1 for tid, r in self.rechecks.items() if r.due > now and tid not in self.jobs)
        free = Resources(
            workers=len(self.free_slots),
            timed=self.pool.free(),
            timed_capacity=self.pool.capacity,
            lendable=self.pool.lendable(),
            preparing=self.pool.preparation_free(),
            running=Counter(job.stage for job, _, _ in self.jobs.values()),
            limits=self.settings.stage_limits,
            busy_models=frozenset(job.task.model_pk for job, _, _ in self.jobs.values()),
            reserved=waiting,
        )
        return select(candidates, free)

    def _devices(self, stage: str, model: ModelRecord) -> int:
        """Timed slots one job of `stage` for `model` holds at once."""
        world = model.training.processes if model.training is not None else None
        return devices_needed(model.metadata, stage, world) if is_timed(stage) else 1

    def _dispatch_one(self, choice: Candidate) -> int:
        """Claim and start one selected task, or start a due gate re-check; 1 when it changed something."""
        slot = self.free_slots[-1]
        if choice.recheck:
            return self._start_recheck(self.rechecks[choice.task_id], slot)
        try:
            task = self.store.claim_task(choice.task_id, self._worker_id(slot), self.settings.lease_s)
        except StaleTokenError:  # no longer pending (a person's action, another team lead)
            return 0
        if self._crash_looping(task):
            return 1
        if task.attempts > self.settings.budget(task.stage):
            self._end_unstarted(
                task,
                {
                    "rule": "attempt_budget_exhausted",
                    "summary": f"{task.attempts - 1} attempts were interrupted or failed",
                },
            )
            return 1
        model = self.store.get_model(task.model_id)
        placement = self._place(task, model)
        if placement is None:
            return 1
        self.free_slots.pop()
        self._start(self._job(task, model, slot, placement=placement), slot)
        return 1

    def _place(self, task: TaskRecord, model: ModelRecord) -> Placement | None:
        """The just-claimed task's devices; a model this host can never hold is blocked with the numbers."""
        need = self._devices(task.stage, model)
        placement = self.pool.acquire(task.stage, need, lend=True)  # selection lent only what is idle
        if placement is not None:
            return placement
        if need > self.pool.capacity:  # a refusal: no retry on this host can change it
            diag = {
                "rule": "not_enough_devices",
                "summary": f"its plan needs {need} {self.pool.kind} device(s) at once; "
                f"this host has {self.pool.capacity} timed slot(s)",
                "devices_needed": need,
                "host_slots": self.pool.capacity,
            }
            self._end_unstarted(task, as_refusal(diag), status="blocked")
            return None
        try:  # raced: the devices were taken between the check and the claim (cannot happen single-threaded)
            self.store.release_task(task.id, task.fencing_token, "no free device", origin=self.settings.agent_id)
        except StaleTokenError:
            pass
        return None

    def _crash_looping(self, task: TaskRecord) -> bool:
        """Fail a just-claimed task whose last attempts all ended without an outcome."""
        count = self.store.interruptions(task.id)
        if count < self.settings.max_interruptions:
            return False
        self._end_unstarted(
            task,
            {
                "rule": "interrupted_too_often",
                "summary": f"{count} attempts in a row ended without an outcome (worker or team lead "
                "killed, lease lost, shutdown); not starting another",
                "interruptions": count,
                "max_interruptions": self.settings.max_interruptions,
            },
        )
        return True

    def _worker_id(self, slot: int) -> str:
        return f"{self.settings.agent_id}.w{slot}"

    def _job(
        self,
        task: TaskRecord,
        model: ModelRecord,
        slot: int,
        log_path: Path | None = None,
        placement: Placement | None = None,
    ) -> Job:
        return Job(
            task=task,
            model=model,
            ref=self.refs[task.stage],
            worker_id=self._worker_id(slot),
            adaptation_dir=adaptations_dir() / task.adaptation_name,
            board_path=self.store.path.resolve(),
            log_path=log_path or logs_dir() / task.adaptation_name / task.stage / f"attempt-{task.attempts}.log",
            **self.settings.attempt_limits(task.stage),
            settings=self.worker_settings,
            extra_stages=self.extra_stages,
            placement=placement,
            directives=self.steering.directives(task.model_id, task.stage) if self.steering is not None else [],
        )

    def _start_recheck(self, waiting: Recheck, slot: int) -> int:
        """Start a due gate re-check on the attempt's kept staging copy, placed like its stage's job;
        1 when it started (or its copy was gone: the task is released, the stage runs again)."""
        job = waiting.job
        if not job.work_dir.is_dir():
            self.rechecks.pop(job.task.id)
            try:
                self.store.release_task(
                    job.task.id,
                    job.token,
                    "the staging copy its gate re-check needs is gone",
                    origin=self.settings.agent_id,
                )
            except StaleTokenError:
                pass
            return 1
        placement = self.pool.acquire(job.stage, self._devices(job.stage, job.model), lend=True)
        if placement is None:
            return 0
        self.free_slots.pop()
        self._start(replace(job, worker_id=self._worker_id(slot), placement=placement, recheck=waiting.done + 1), slot)
        return 1

    def _start(self, job: Job, slot: int) -> None:
        task, placement, log_path = job.task, job.placement, job.log_path

        def record() -> int:
            """The attempt, and the worker's agent row (role = the stage's), kept by the team lead."""
            attempt = self.store.start_attempt(
                task.id,
                task.fencing_token,
                AttemptStart(
                    job.command(),
                    str(log_path),
                    placement=placement.as_dict() if placement else None,
                    recheck=job.recheck,
                ),
            )
            self.store.register_agent(job.worker_id, STAGE_ROLES.get(task.stage, task.stage))
            self.store.agent_heartbeat(job.worker_id, task.id)
            return attempt

        attempt_id = retry_busy(record, "recording an attempt", self.log.warning)
        self.jobs[task.id] = (job, attempt_id, slot)
        self._used.add(job.worker_id)
        self.stats.outcomes["dispatched"] += 1
        self.log.info(
            "%s/%s: %s started on %s%s",
            task.model_id,
            task.stage,
            job.what,
            job.worker_id,
            f" ({' '.join(placement.devices)})" if placement and placement.devices else "",
        )
        self.executor.submit(job)

    # ------------------------------------------------------------------ results
    def _finish(self, result: JobResult) -> None:
        job, attempt_id, slot = self.jobs[result.job.task.id]
        name = f"{job.task.model_id}/{job.stage}"
        if job.gate_only:  # judged with the run it re-checks (some executors report an early crash as the run's)
            early = result.run
            gate = result.gate or (
                PhaseResult(early.exit_code, early.duration_s, early.timed_out, None, early.log_tail, early.refused)
                if early is not None
                else None
            )
            result = replace(result, run=PhaseResult(None, 0.0, False, self.rechecks[job.task.id].outcome), gate=gate)
        try:  # a verdict is never dropped: after a minute of a busy board, it waits for the next tick
            outcome, diagnosis, fix = retry_busy(
                lambda: self._judge(job, result), f"recording {name}", self.log.warning, give_up_after_s=60.0
            )
        except BoardBusyError as exc:
            self.log.error("%s: board still busy, the result waits (%s): %s", name, job.result_path("gate").parent, exc)
            self._unrecorded.append(result)
            return
        self.jobs.pop(result.job.task.id)
        self._lost.discard(job.task.id)
        self.free_slots.append(slot)
        if job.placement is not None:
            self.pool.release(job.placement)
        if outcome != "inconclusive":  # an inconclusive gate's copy waits for its re-check
            self.rechecks.pop(job.task.id, None)
            attempt_dir.discard(job.work_dir)  # promoted already when it passed its gate
        # The phase that decided the outcome: the gate when it ran, else the stage's run.
        decisive = result.gate or result.run
        exit_code = decisive.exit_code if decisive else None
        end = AttemptEnd(outcome, exit_code, result.duration_s, diagnosis, fix, agent_backend=_agent_backends(result))
        try:
            retry_busy(
                lambda: self.store.finish_attempt(attempt_id, end),
                f"recording the attempt of {name}",
                self.log.warning,
                give_up_after_s=60.0,
            )
        except BoardError as exc:
            self.log.error("%s/%s: could not record the attempt: %s", job.task.model_id, job.stage, exc)
        self._idle.add(job.worker_id)
        self.stats.outcomes[outcome] += 1
        if result.placement:
            self._record_placement(job, result)
        _append(
            job.log_path,
            f"[team-lead] {job.what}: {outcome}" + (f": {diagnosis.get('summary', '')}" if diagnosis else "") + "\n",
        )

    def _record_placement(self, job: Job, result: JobResult) -> None:
        """Which host and device ran the attempt, and when (a distributed executor reports it)."""
        where = result.placement
        devices = ",".join(f"{kind}:{'+'.join(ids)}" for kind, ids in sorted(where.get("devices", {}).items()))
        try:
            self._job_event(
                job,
                "attempt_placement",
                f"{job.stage} attempt {job.attempt} ran on {where.get('host', '?')} {devices or 'CPU'}",
                {**where, "attempt": job.attempt},
            )
        except BoardError as exc:  # the verdict is recorded; a lost placement line is only logged
            self.log.warning("%s/%s: placement not recorded: %s", job.task.model_id, job.stage, exc)

    def _judge(self, job: Job, result: JobResult) -> tuple[str, dict[str, Any] | None, str | None]:
        """Decide the transition; returns (attempt outcome, diagnosis, fix applied)."""
        name = f"{job.task.model_id}/{job.stage}"
        if result.stopped or result.lost:
            reason = f"the host running it was lost ({result.lost})" if result.lost else "team lead stopping"
            try:
                self.store.release_task(job.task.id, job.token, reason, origin=self.settings.agent_id)
            except StaleTokenError:
                pass
            if result.lost:
                self.log.warning("%s: returned to pending: %s", name, reason)
            else:
                self.log.info("%s: returned to pending (shutdown)", name)
            return "released", None, None
        run = result.run or PhaseResult(None, 0.0, False, None)
        out = run.data
        fix = out.fix_applied if out else None
        try:
            if out is None:
                diag = _crash_diagnosis("run", run, job)
                return (*self._failure(job, diag), fix)
            events = [payload.to_data(e) for e in out.events]
            if out.status == "done":
                gate = result.gate or PhaseResult(None, 0.0, False, None)
                verdict = gate.data
                if verdict is None:
                    diag = _crash_diagnosis("gate", gate, job)
                elif verdict.passed:
                    return self._complete(job, out, verdict)
                elif verdict.inconclusive:
                    return (*self._inconclusive(job, out, verdict, events), fix)
                else:
                    diag = {"rule": "gate_failed", "summary": f"gate failed: {verdict.summary}", "gate": verdict.report}
                diag = _with_unverified(diag, out)
                return (*self._failure(job, diag, events), fix)
            diag = dict(out.diagnosis or {})
            diag.setdefault("rule", f"stage_{out.status}")
            diag.setdefault("summary", out.summary)
            if is_refusal(diag):  # deterministic: recorded with its remedy, never retried
                diag = as_refusal(diag)
            if out.status == "failed" and out.spec_change:
                diag = _with_unverified(diag, out)
                return self._send_back(job, diag, out.spec_change, events), diag, fix
            if out.status in ("blocked", "skipped"):  # the program's decision: its metadata says why
                figures_only = StageOutcome(out.status, out.summary, metrics=out.metrics)
                diag = _live_paths(job, _with_unverified(diag, figures_only))  # figures never stored
                self._fail(
                    job.task,
                    diag,
                    status=out.status,
                    fields=out.model_fields,
                    metadata=out.model_metadata,
                    events=events,
                )
                return out.status, diag, fix
            diag = _with_unverified(diag, out)
            return (*self._failure(job, diag, events), fix)
        except StaleTokenError as exc:
            self.log.warning("%s: result discarded, the lease was lost: %s", name, exc)
            self._job_event(
                job,
                "stale_result_discarded",
                f"{job.stage}: result of attempt {job.attempt} (token {job.token}) discarded, its lease was lost",
            )
            return "stale", {"rule": "lease_lost", "summary": str(exc)}, fix

    def _promote(self, job: Job) -> None:
        """Swap the gated staging copy in, holding the board's write lock with the token checked
        (StaleTokenError: nothing is promoted). A retry after a busy board finds it done."""
        if not job.work_dir.is_dir():
            return
        with self.store.while_owned(job.task.id, job.token, self.settings.lease_s):
            attempt_dir.promote(job.work_dir, job.adaptation_dir)

    def _complete(
        self, job: Job, out: StageOutcome, verdict: GateResult
    ) -> tuple[str, dict[str, Any] | None, str | None]:
        """The gate passed: completion, the stage's figures, its metadata and its agent events in one
        fenced transaction."""
        name = f"{job.task.model_id}/{job.stage}"
        fix = out.fix_applied
        result = {
            "summary": out.summary,
            "result": out.result,
            "gate": {"summary": verdict.summary, "report": verdict.report},
            "fix_applied": fix,
            "attempt": job.attempt,
        }
        result = attempt_dir.relocate(result, job.work_dir, job.adaptation_dir)
        events = [payload.to_data(e) for e in out.events]
        try:
            self._promote(job)
            self.store.complete_task(
                job.task.id,
                job.token,
                result,
                origin=self.settings.agent_id,
                figures=[payload.to_data(f) for f in out.metrics],
                model_fields=out.model_fields,
                model_metadata=out.model_metadata,
                events=events,
            )
        except (StaleTokenError, BoardBusyError):
            raise
        except BoardError as exc:  # bad figures or fields from a stage are its bug: the attempt fails
            diag = _with_unverified(
                {"rule": "bad_stage_figures", "summary": f"the stage's figures were refused: {exc}"}, out
            )
            return (*self._failure(job, diag, events), fix)
        self.log.info("%s: completed (gate passed: %s)", name, verdict.summary)
        return "completed", None, fix

    def _failure(
        self, job: Job, diag: dict[str, Any], events: Sequence[dict[str, Any]] = ()
    ) -> tuple[str, dict[str, Any]]:
        """A failed attempt: retry while the stage's budget lasts, then mark failed. A refusal
        (ascendbridge/refusals.py: a retry cannot change it) fails on its first attempt, and so does
        the error the previous attempt ended with too. Returns the outcome and the diagnosis."""
        diag = _live_paths(job, diag)
        if not is_refusal(diag):
            diag = self._same_error_twice(job, diag)
        final = is_refusal(diag) or job.attempt >= self.settings.budget(job.stage)
        self._fail(job.task, {**diag, "log_path": str(job.log_path)}, final=final, events=events)
        return ("failed" if final else "retry"), diag

    def _same_error_twice(self, job: Job, diag: dict[str, Any]) -> dict[str, Any]:
        """When this task's previous attempt was retried after the same error (its rule, exception
        class and message), a third try would meet it again: the diagnosis says so and is final. A
        worker killed by a signal (negative exit code: a person, the OOM killer, a lost host) was
        interrupted, not failed by its stage: never counted as the same error."""
        exit_code = diag.get("exit_code")
        if isinstance(exit_code, int) and exit_code < 0:
            return diag
        earlier = [
            a
            for _, a in self.store.list_attempts(job.task.model_id, job.stage)
            if a.task_id == job.task.id
            and a.fencing_token < job.token
            and a.outcome not in (None, "released", "stale", "inconclusive")
        ]
        if not earlier:
            return diag
        last = max(earlier, key=lambda a: a.id)
        if last.outcome != "retry" or _error_key(last.diagnosis or {}) != _error_key(diag):
            return diag
        return {
            **diag,
            "rule": "same_error_twice",
            "error_rule": diag.get("rule"),
            "summary": f"the same error twice: {diag.get('summary', '')}",
            "retryable": False,
            "remedy": UNLISTED_REMEDY,
        }

    def _inconclusive(
        self, job: Job, out: StageOutcome, verdict: GateResult, events: Sequence[dict[str, Any]]
    ) -> tuple[str, dict[str, Any]]:
        """The gate could not decide: no attempt spent, the stage not run again. Its staging copy waits,
        under the lease, for a re-check of the gate alone after a backoff; after `gate_rechecks` of them
        the task fails with the gate's last reason. Returns the outcome and the diagnosis."""
        done, limit = job.recheck, self.settings.gate_rechecks
        reason = verdict.summary
        if done >= limit:
            diag = _with_unverified(
                {
                    "rule": "gate_inconclusive",
                    "gate": verdict.report,
                    "rechecks": done,
                    "summary": f"the gate could not decide after {done} re-check(s) of attempt {job.attempt}: {reason}",
                    "retryable": False,
                    "remedy": "re-check when the host is quieter (`board_ops.py retry MODEL`), "
                    "or allow more re-checks (--gate-rechecks)",
                },
                out,
            )
            self._fail(job.task, {**diag, "log_path": str(job.log_path)}, final=True, events=events)
            return "failed", diag
        delay = self.settings.gate_recheck_s * 2**done
        self.rechecks[job.task.id] = Recheck(job, out, done, time.monotonic() + delay)
        diag = {
            "rule": "gate_inconclusive",
            "summary": f"gate inconclusive: {reason}",
            "gate": verdict.report,
            "recheck": done + 1,
            "rechecks": limit,
            "recheck_in_s": delay,
        }
        message = (
            f"{job.stage} attempt {job.attempt}: the gate could not decide ({reason}); gate re-check "
            f"{done + 1} of {limit} in {delay:.0f} s, no attempt spent"
        )
        self._job_event(
            job,
            "gate_inconclusive",
            message,
            {"attempt": job.attempt, "recheck": done + 1, "rechecks": limit, "delay_s": delay, "reason": reason},
        )
        self.log.warning("%s/%s: %s", job.task.model_id, job.stage, message.split(": ", 1)[1])
        return "inconclusive", diag

    def _job_event(self, job: Job, kind: str, message: str, data: dict[str, Any] | None = None) -> None:
        """An event of the team lead's about one attempt: under its model and stage, with its token."""
        data = {**(data or {}), "token": job.token}
        self.store.add_event(NewEvent(kind, message, job.task.model_id, job.stage, data, self.settings.agent_id))

    def _apply_guidance(self) -> int:
        """People's open guidance, applied; how many items."""
        return self.steering.apply_open() if self.steering is not None else 0

    def _send_back(
        self, job: Job, diag: dict[str, Any], change: dict[str, Any], events: Sequence[dict[str, Any]] = ()
    ) -> str:
        """The run found what only a spec change fixes: this attempt fails, the healer gets the
        finding as a directive and the model rolls back to healing (guidance.send_back); the stage
        runs again after the healer's fix. A board that refuses the rollback leaves the failure.
        Returns the attempt's outcome: `sent_back`, or `failed` when the rollback was refused."""
        name = f"{job.task.model_id}/{job.stage}"
        self._fail(job.task, {**diag, "log_path": str(job.log_path), "spec_change": change}, final=True, events=events)
        if self.steering is None:
            self.log.warning("%s: spec change not sent back to healing: no steering on this board", name)
            return "failed"
        try:
            self.steering.send_back(job.task.model_id, job.stage, change, self.settings.agent_id)
        except (StaleTokenError, BoardBusyError):
            raise
        except BoardError as exc:
            self.log.warning("%s: spec change not sent back to healing: %s", name, exc)
            return "failed"
        self.log.info("%s: sent back to healing: %s", name, change.get("summary", ""))
        return "sent_back"  # not a failure of this run: the stage waits for the healer's fix

    def _end_unstarted(self, task: TaskRecord, diag: dict[str, Any], status: str = "failed") -> None:
        """Fail or block a claimed task before any attempt of it starts, counted in this run's outcomes
        as a judged attempt is (the exit code says a task failed or was blocked in this run)."""
        self._fail(task, diag, final=True, status=status)
        self.stats.outcomes[status] += 1

    def _fail(
        self,
        task: TaskRecord,
        diag: dict[str, Any],
        final: bool = True,
        status: str = "",
        fields: dict[str, Any] | None = None,
        metadata: dict[str, Any] | None = None,
        events: Sequence[dict[str, Any]] = (),
    ) -> None:
        budget = self.settings.budget(task.stage)
        diag = {**diag, "attempt": task.attempts, "budget": budget}
        status = status or ("failed" if final else "pending")
        try:
            self.store.fail_task(
                task.id,
                task.fencing_token,
                diag,
                status=status,
                origin=self.settings.agent_id,
                model_fields=fields,
                model_metadata=metadata,
                events=events,
            )
        except (StaleTokenError, BoardBusyError):
            raise
        except BoardError as exc:  # bad fields from a stage are its bug: record the decision without them
            self.log.error("%s/%s: metadata not stored: %s", task.model_id, task.stage, exc)
            self.store.fail_task(
                task.id, task.fencing_token, diag, status=status, origin=self.settings.agent_id, events=events
            )
        level = logging.INFO if status == "skipped" else logging.WARNING
        self.log.log(
            level,
            "%s/%s: %s (attempt %d/%d): %s%s",
            task.model_id,
            task.stage,
            "retrying" if status == "pending" else status,
            task.attempts,
            budget,
            diag.get("summary", ""),
            f" (refusal, not retried; remedy: {diag['remedy']})" if diag.get("retryable") is False else "",
        )

    # ------------------------------------------------------------------ shutdown
    def _shutdown(self) -> None:
        for task_id, waiting in list(self.rechecks.items()):
            if task_id in self.jobs:  # running: released with the jobs below
                continue
            try:  # nothing was promoted; the next run runs the stage again
                self.store.release_task(
                    task_id,
                    waiting.job.token,
                    "team lead stopping; its gate re-check will not run",
                    origin=self.settings.agent_id,
                )
            except BoardError as exc:  # the lease expires instead
                self.log.warning(
                    "%s/%s: not released at shutdown: %s", waiting.job.task.model_id, waiting.job.stage, exc
                )
            attempt_dir.discard(waiting.job.work_dir)
            self.rechecks.pop(task_id)
        if self.jobs:
            self.log.info("stopping %d running worker(s); their tasks go back to pending", len(self.jobs))
            self.executor.stop()
            deadline = time.monotonic() + 30
            while self.jobs and time.monotonic() < deadline:
                for result in self._take_unrecorded() + self.executor.collect(0.5):
                    self._finish(result)
        try:
            for worker_id in sorted(self._used):
                self.store.stop_agent(worker_id)
            self.store.stop_agent(self.settings.agent_id)
        except BoardBusyError as exc:  # the rows go stale; cleanup_stale_agents handles them
            self.log.warning("board busy at shutdown, agent rows not marked stopped: %s", exc)


def _live_paths(job: Job, diag: dict[str, Any]) -> dict[str, Any]:
    """A diagnosis naming the adaptation directory, not the attempt's staging copy (discarded with
    the attempt, and named after its token): what a person can open, and the same words on every
    attempt, so the same error twice is seen as such."""
    return attempt_dir.relocate(diag, job.work_dir, job.adaptation_dir)


def _error_key(diag: dict[str, Any]) -> tuple[object, object, object]:
    """What makes two failures the same error: its rule, exception class and message."""
    return diag.get("rule"), diag.get("exception"), diag.get("summary")


def _agent_backends(result: JobResult) -> str:
    """Which agent backends acted in the attempt, from the agent runs its stage's outcome reports."""
    out = result.run.data if result.run else None
    return backends_used(out.events if isinstance(out, StageOutcome) else ())


def _with_unverified(diag: dict[str, Any], out: StageOutcome) -> dict[str, Any]:
    """A diagnosis that keeps what the run proposed for the board, labelled unverified: the
    attempt record shows it; the model's figures never include it."""
    proposed = {
        key: value
        for key, value in payload.to_data(out).items()
        if key in ("metrics", "model_fields", "model_metadata") and value
    }
    return {**diag, "unverified": proposed} if proposed else diag


def _crash_diagnosis(phase: str, res: PhaseResult[Any], job: Job) -> dict[str, Any]:
    if res.timed_out:
        limit = job.timeout_s if phase == "run" else job.gate_timeout_s
        return {
            "rule": f"{phase}_timeout",
            "summary": f"{phase} killed after its {limit:.0f} s timeout",
            "log_path": str(job.log_path),
        }
    if res.refused:  # the worker wrote a result that does not match the schema
        return {
            "rule": f"{phase}_bad_result",
            "summary": res.refused,
            "exit_code": res.exit_code,
            "log_path": str(job.log_path),
        }
    return {
        "rule": f"{phase}_crashed",
        "summary": f"{phase} worker exited with code {res.exit_code} without a result",
        "exit_code": res.exit_code,
        "log_tail": res.log_tail[-2000:],
        "log_path": str(job.log_path),
    }


def _append(path: Path, text: str) -> None:
    try:
        with path.open("a", encoding="utf-8") as fh:
            fh.write(text)
    except OSError:
        pass
