"""The team-lead loop: reclaim, apply guidance, dispatch, collect, gate, record.

Only this loop changes task state, and only through the board's narrow `LeaseBoard` interface
with the task's fencing token: a worker proposes (its run's `StageOutcome`), the stage's gate
checks (its `GateResult`, in its own process), and the transition is recorded here, with the
agent-history events the run carried. The team lead alone keeps the leases of its jobs (workers
never open the board); when one is lost it cancels that job. A result that arrives after its
lease was reclaimed is discarded, so a task can never be completed twice.

Containment: each attempt works in a staging copy of its adaptation directory, promoted in one
rename only when its gate passed and its token is still current (ascendbridge.workers.attempt_dir).
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

The loop composes its parts, each a module: recovery.py (start-up), upkeep.py (heartbeats, leases,
reclaiming, guidance), dispatch.py (selection, claim, placement), verdicts.py and transitions.py
(judging a finished job and recording the task's transition), shutdown.py; they share one RunState
(state.py). Only `_start` and `_finish` stay here: the two points a job enters and leaves the run.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable
from typing import Any

from ascendbridge.board import AttemptStart
from ascendbridge.board.leases import LeaseBoard
from ascendbridge.config import adaptations_dir, logs_dir
from ascendbridge.settings import Settings
from ascendbridge.stage_registry import STAGE_ROLES, StageRef, check_loadable
from ascendbridge.teamlead.diskspace import min_free_bytes, shortage
from ascendbridge.teamlead.dispatch import Dispatch
from ascendbridge.teamlead.eta import CostModel
from ascendbridge.teamlead.recovery import Recovery
from ascendbridge.teamlead.settings import TeamLeadSettings
from ascendbridge.teamlead.shutdown import Shutdown
from ascendbridge.teamlead.state import Recheck, RunState, RunStats, Steering
from ascendbridge.teamlead.transitions import Transitions
from ascendbridge.teamlead.upkeep import Upkeep
from ascendbridge.teamlead.verdicts import Verdicts
from ascendbridge.workers.busy import retry_busy
from ascendbridge.workers.devices import detect
from ascendbridge.workers.executor import Executor, Job, JobResult
from ascendbridge.workers.placement import DevicePool

__all__ = ["Recheck", "RunStats", "Steering", "TeamLead"]


class TeamLead:
    """The loop: recover, then tick (upkeep, record results, dispatch) until done or stopped, then shut down."""

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
        stats = RunStats()
        self.state = RunState(
            store,
            settings,
            executor,
            refs,
            log,
            # Timed stages take devices (or, on a CPU-only host, core groups) from here, exclusively.
            pool or DevicePool(detect(settings.devices), settings.timed_cores),
            # People's guidance and the healer's directives (ascendbridge.teamlead.guidance) steer the
            # board through their own interface; the loop only says when.
            steering,
            costs or CostModel.shipped(log),
            _runnable_stages(settings, refs, stats, log),
            stats,
            free_slots=list(range(settings.workers, 0, -1)),
        )
        self.on_tick = on_tick
        # Resolved once; every worker validates this back into the model (ascendbridge.settings).
        worker_settings: dict[str, Any] = json.loads((settings.resolved or Settings.resolve()).payload())
        self.transitions = Transitions(self.state)
        self.verdicts = Verdicts(self.state, self.transitions)
        self.dispatch = Dispatch(self.state, self.transitions, self._start, worker_settings)
        self.recovery = Recovery(self.state, self.dispatch, self.verdicts)
        self.upkeep = Upkeep(self.state)
        self.shutdown = Shutdown(self.state, self._finish)
        self.min_free = min_free_bytes()
        self.short_of_space: str | None = None  # why this run stopped early: too little free space

    # What the progress lines, the summary and the CLI read of the run.
    @property
    def store(self) -> LeaseBoard:
        return self.state.store

    @property
    def settings(self) -> TeamLeadSettings:
        return self.state.settings

    @property
    def refs(self) -> dict[str, StageRef]:
        return self.state.refs

    @property
    def pool(self) -> DevicePool:
        return self.state.pool

    @property
    def stats(self) -> RunStats:
        return self.state.stats

    @property
    def jobs(self) -> dict[int, tuple[Job, int, int]]:
        return self.state.jobs

    @property
    def stop_requested(self) -> threading.Event:
        return self.state.stop_requested

    def run(self) -> RunStats:
        """Loop until nothing is runnable or running (--once) or until asked to stop."""
        state, s = self.state, self.settings
        self.store.register_agent(s.agent_id, "team-lead")
        inventory = self.pool.inventory
        self.store.record_host_devices(inventory.host, inventory.as_rows(), inventory.source, origin=s.agent_id)
        state.log.info(
            "team lead %s: stages %s, %d worker(s), %s",
            s.agent_id,
            ",".join(s.stages),
            s.workers,
            "forever" if s.forever else "once",
        )
        state.log.info("devices: %s; %s", inventory.describe(), self.pool.describe())
        for warning in self.pool.warnings:
            state.log.warning("devices: %s", warning)
        try:
            retry_busy(self.recovery.recover, "start-up recovery", state.log.warning, stop=self.stop_requested)
            while not self.stop_requested.is_set():
                self.upkeep.tick()
                for result in state.take_unrecorded() + state.executor.collect(0):
                    self._finish(result)
                if self._out_of_space():
                    break
                dispatched = self.dispatch.dispatch()
                if self.on_tick:
                    self.on_tick(self)
                if (
                    not s.forever
                    and dispatched == 0
                    and state.executor.in_flight() == 0
                    and not state.rechecks
                    and not self._orphans()
                ):
                    if self.upkeep.apply_guidance() == 0:  # a late "retry" still counts
                        break
                    continue
                for result in state.executor.collect(s.poll_s):
                    self._finish(result)
        finally:
            self.shutdown()
        return self.stats

    def _out_of_space(self) -> bool:
        """Too little free space for the board, adaptations or logs (diskspace.py): stop now, while
        the running attempts can still be recorded as released."""
        self.short_of_space = shortage(
            {"the board": self.store.path.parent, "adaptations": adaptations_dir(), "logs": logs_dir()}, self.min_free
        )
        if self.short_of_space:
            self.state.log.warning("stopping: %s", self.short_of_space)
        return self.short_of_space is not None

    def _orphans(self) -> int:
        """Tasks in progress on the board that no worker of ours runs (a killed team lead's):
        --once waits for their leases to expire and runs them, instead of leaving them behind."""
        counts = self.store.status_counts()
        return sum(counts.get(stage, {}).get("in_progress", 0) for stage in self.state.runnable)

    def _start(self, job: Job, slot: int) -> None:
        """A placed job enters the run: its attempt row and its worker's agent row, then the executor."""
        state = self.state
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

        attempt_id = retry_busy(record, "recording an attempt", state.log.warning)
        state.jobs[task.id] = (job, attempt_id, slot)
        state.used.add(job.worker_id)
        state.stats.outcomes["dispatched"] += 1
        state.log.info(
            "%s/%s: %s started on %s%s",
            task.model_id,
            task.stage,
            job.what,
            job.worker_id,
            f" ({' '.join(placement.devices)})" if placement and placement.devices else "",
        )
        state.executor.submit(job)

    def _finish(self, result: JobResult) -> None:
        """A finished job leaves the run: its verdict and attempt recorded (verdicts.py)."""
        self.verdicts.finish(result)


def _runnable_stages(
    settings: TeamLeadSettings, refs: dict[str, StageRef], stats: RunStats, log: logging.Logger
) -> list[str]:
    """The selected stages whose code loads; the others are noted in `stats` and their tasks stay pending."""
    runnable = []
    for stage in settings.stages:
        problem = check_loadable(refs.get(stage), stage)
        if problem is None:
            runnable.append(stage)
        else:
            stats.not_runnable[stage] = problem
            log.warning("stage %s is not runnable; its tasks stay pending: %s", stage, problem)
    return runnable
