"""Dispatch and placement: what starts now, on which worker slot and which devices.

By readiness and resources, not by stage order (the policy is ascendbridge.teamlead.selection, a pure
function): a free timed slot takes a ready timed task first; untimed work runs beside it on the cores
no timed slot owns; the longest model's work first. A claimed task that cannot start (crash-looping,
out of attempts, more devices than the host has) ends here, before any attempt of it.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from ascendbridge.board import BoardBusyError, ModelRecord, StaleTokenError, TaskRecord
from ascendbridge.config import adaptations_dir, logs_dir
from ascendbridge.discovery.config_estimate import built_parameters
from ascendbridge.refusals import as_refusal
from ascendbridge.stage_registry import extra_stages_env
from ascendbridge.teamlead.eta import model_size
from ascendbridge.teamlead.selection import Candidate, Resources, select
from ascendbridge.teamlead.state import Part, Recheck, RunState
from ascendbridge.teamlead.transitions import Transitions
from ascendbridge.workers.executor import Job
from ascendbridge.workers.placement import Placement, devices_needed, is_timed, stage_devices

# Pending tasks each stage offers the selection, at least: the longest model can only be served
# first if it is among them (the board ranks by priority and registration).
READY_WINDOW = 64


class Dispatch(Part):
    """Select, claim and place ready tasks and due gate re-checks; `start` (the loop's) runs each."""

    def __init__(
        self,
        state: RunState,
        transitions: Transitions,
        start: Callable[[Job, int], None],
        worker_settings: dict[str, Any],
    ) -> None:
        super().__init__(state)
        self.transitions = transitions
        self.start = start
        self.extra_stages = extra_stages_env(state.refs)
        self.worker_settings = worker_settings  # resolved once; every worker validates it back

    def dispatch(self) -> int:
        """Start what the selection picks (ready tasks and due gate re-checks, for the free workers and
        timed slots) until it picks nothing; returns how many tasks were started or ended at claim."""
        acted = 0
        while self.state.free_slots and not self.state.stop_requested.is_set():
            try:
                progressed = 0
                for choice in self._select():
                    if self.state.free_slots:
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
        state, now = self.state, time.monotonic()
        pool, costs = state.pool, state.costs
        window = max(READY_WINDOW, len(state.free_slots) + len(state.jobs) + pool.capacity)
        ready = self.store.ready_tasks(state.runnable, window)
        candidates = [
            Candidate(
                t.task_id,
                t.model_pk,
                t.stage,
                t.priority,
                stage_devices(t.stage, t.plan_devices, t.plan_tensor_parallel, t.train_processes)
                if is_timed(t.stage)
                else 1,
                work_s=costs.model_work_s(
                    t.task_family, t.skip_stages, built_parameters(t.parameter_count, t.config or {}, t.proxy_depth)
                ),
            )
            for t in ready
        ]
        due = [r for tid, r in state.rechecks.items() if r.due <= now and tid not in state.jobs]
        candidates += [
            Candidate(
                r.job.task.id,
                r.job.task.model_pk,
                r.job.stage,
                r.job.task.priority,
                self._devices(r.job.stage, r.job.model),
                recheck=True,
                work_s=costs.model_work_s(r.job.model.task_family, r.job.model.skip_stages, model_size(r.job.model)),
            )
            for r in due
        ]
        waiting = sum(1 for tid, r in state.rechecks.items() if r.due > now and tid not in state.jobs)
        free = Resources(
            workers=len(state.free_slots),
            timed=pool.free(),
            timed_capacity=pool.capacity,
            lendable=pool.lendable(),
            preparing=pool.preparation_free(),
            running=Counter(job.stage for job, _, _ in state.jobs.values()),
            limits=self.settings.stage_limits,
            busy_models=frozenset(job.task.model_pk for job, _, _ in state.jobs.values()),
            reserved=waiting,
        )
        return select(candidates, free)

    def _devices(self, stage: str, model: ModelRecord) -> int:
        """Timed slots one job of `stage` for `model` holds at once."""
        world = model.training.processes if model.training is not None else None
        return devices_needed(model.metadata, stage, world) if is_timed(stage) else 1

    def _dispatch_one(self, choice: Candidate) -> int:
        """Claim and start one selected task, or start a due gate re-check; 1 when it changed something."""
        slot = self.state.free_slots[-1]
        if choice.recheck:
            return self._start_recheck(self.state.rechecks[choice.task_id], slot)
        try:
            task = self.store.claim_task(choice.task_id, self.worker_id(slot), self.settings.lease_s)
        except StaleTokenError:  # no longer pending (a person's action, another team lead)
            return 0
        if self._crash_looping(task):
            return 1
        if task.attempts > self.settings.budget(task.stage):
            self.transitions.end_unstarted(
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
        self.state.free_slots.pop()
        self.start(self.job(task, model, slot, placement=placement), slot)
        return 1

    def _place(self, task: TaskRecord, model: ModelRecord) -> Placement | None:
        """The just-claimed task's devices; a model this host can never hold is blocked with the numbers."""
        pool = self.state.pool
        need = self._devices(task.stage, model)
        placement = pool.acquire(task.stage, need, lend=True)  # selection lent only what is idle
        if placement is not None:
            return placement
        if need > pool.capacity:  # a refusal: no retry on this host can change it
            diag = {
                "rule": "not_enough_devices",
                "summary": f"its plan needs {need} {pool.kind} device(s) at once; "
                f"this host has {pool.capacity} timed slot(s)",
                "devices_needed": need,
                "host_slots": pool.capacity,
            }
            self.transitions.end_unstarted(task, as_refusal(diag), status="blocked")
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
        self.transitions.end_unstarted(
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

    def worker_id(self, slot: int) -> str:
        return f"{self.settings.agent_id}.w{slot}"

    def job(
        self,
        task: TaskRecord,
        model: ModelRecord,
        slot: int,
        log_path: Path | None = None,
        placement: Placement | None = None,
    ) -> Job:
        """The job of one attempt of `task` on worker `slot` (recovery rebuilds a dead one's with its log)."""
        steering = self.state.steering
        return Job(
            task=task,
            model=model,
            ref=self.state.refs[task.stage],
            worker_id=self.worker_id(slot),
            adaptation_dir=adaptations_dir() / task.adaptation_name,
            board_path=self.store.path.resolve(),
            log_path=log_path or logs_dir() / task.adaptation_name / task.stage / f"attempt-{task.attempts}.log",
            **self.settings.attempt_limits(task.stage),
            settings=self.worker_settings,
            extra_stages=self.extra_stages,
            placement=placement,
            directives=steering.directives(task.model_id, task.stage) if steering is not None else [],
        )

    def _start_recheck(self, waiting: Recheck, slot: int) -> int:
        """Start a due gate re-check on the attempt's kept staging copy, placed like its stage's job;
        1 when it started (or its copy was gone: the task is released, the stage runs again)."""
        job = waiting.job
        if not job.work_dir.is_dir():
            self.state.rechecks.pop(job.task.id)
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
        placement = self.state.pool.acquire(job.stage, self._devices(job.stage, job.model), lend=True)
        if placement is None:
            return 0
        self.state.free_slots.pop()
        self.start(replace(job, worker_id=self.worker_id(slot), placement=placement, recheck=waiting.done + 1), slot)
        return 1
