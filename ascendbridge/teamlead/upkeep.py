"""Lease upkeep, on each tick of the loop: the team lead's and its workers' heartbeats, the one
heartbeat of every lease its jobs hold, reclaiming expired leases, and people's guidance.

Workers never touch the board: while this team lead lives its jobs keep their tasks; when it dies
the leases expire. A lease found lost cancels its job at once; its result, when it comes, is stale.
"""

from __future__ import annotations

import time

from ascendbridge.board import BoardBusyError, BoardError, StaleTokenError
from ascendbridge.teamlead.state import Part, RunState
from ascendbridge.workers import attempt_dir

RECLAIM_EVERY_S = 1.0
GUIDANCE_EVERY_S = 0.5  # people type guidance; half a second is invisible, a query per task is not


class Upkeep(Part):
    """Heartbeats, leases, reclaiming and guidance, each at its own period."""

    def __init__(self, state: RunState) -> None:
        super().__init__(state)
        self._last_reclaim = self._last_beat = self._last_guidance = 0.0

    def tick(self) -> None:
        """What is due now; a busy board is retried on the next tick."""
        try:
            self._tick_once()
        except BoardBusyError as exc:  # the next tick tries again
            self.log.warning("board busy during housekeeping, retrying next tick: %s", exc)

    def _tick_once(self) -> None:
        now = time.monotonic()
        if now - self._last_beat >= self.settings.heartbeat_s:
            self.store.agent_heartbeat(self.settings.agent_id, status="running")
            self._keep_leases()
            busy = {job.worker_id for job, _, _ in self.state.jobs.values()}
            for worker_id in self.state.idle - busy:
                try:
                    self.store.agent_heartbeat(worker_id, None)
                except BoardError:  # its worker died before registering: no row to update
                    pass
            self.state.idle.clear()
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
            self.apply_guidance()
            self._last_guidance = now

    def apply_guidance(self) -> int:
        """People's open guidance, applied; how many items."""
        steering = self.state.steering
        return steering.apply_open() if steering is not None else 0

    def _keep_leases(self) -> None:
        """The one heartbeat of every lease (workers never touch the board): while this team lead
        lives its jobs keep their tasks; when it dies the leases expire. A lease found lost (it ran out
        and was reclaimed) cancels its job at once: everything the attempt started is stopped, and its
        result, when it comes, is discarded as stale."""
        state = self.state
        for job, _, _ in state.jobs.values():
            if job.task.id in state.lost:
                continue
            try:
                self.store.heartbeat_task(job.task.id, job.token, self.settings.lease_s)
                self.store.agent_heartbeat(job.worker_id, job.task.id)
            except StaleTokenError as exc:
                self.log.warning("%s/%s: lease lost (%s); stopping its attempt", job.task.model_id, job.stage, exc)
                state.lost.add(job.task.id)
                state.executor.cancel(job)
        for task_id, waiting in list(state.rechecks.items()):
            if task_id in state.jobs:  # its re-check runs: kept above
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
                state.rechecks.pop(task_id)
                attempt_dir.discard(waiting.job.work_dir)
