"""Shutdown: what a stopping team lead leaves behind is pending work, never a half-promoted one.

Gate re-checks waiting for their turn are released (nothing was promoted; the next run runs the
stage again); running workers are stopped and their results recorded as released; the agent rows
are marked stopped (a busy board leaves them stale, for cleanup_stale_agents).
"""

from __future__ import annotations

import time
from collections.abc import Callable

from ascendbridge.board import BoardBusyError, BoardError
from ascendbridge.teamlead.state import Part, RunState
from ascendbridge.workers import attempt_dir
from ascendbridge.workers.executor import JobResult

STOP_WAIT_S = 30.0  # how long stopped workers get to report before the team lead exits anyway


class Shutdown(Part):
    """Release, stop and sign off, recording each stopped job through `finish` (the loop's)."""

    def __init__(self, state: RunState, finish: Callable[[JobResult], None]) -> None:
        super().__init__(state)
        self.finish = finish

    def __call__(self) -> None:
        state = self.state
        for task_id, waiting in list(state.rechecks.items()):
            if task_id in state.jobs:  # running: released with the jobs below
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
            state.rechecks.pop(task_id)
        if state.jobs:
            self.log.info("stopping %d running worker(s); their tasks go back to pending", len(state.jobs))
            state.executor.stop()
            deadline = time.monotonic() + STOP_WAIT_S
            while state.jobs and time.monotonic() < deadline:
                for result in state.take_unrecorded() + state.executor.collect(0.5):
                    self.finish(result)
        try:
            for worker_id in sorted(state.used):
                self.store.stop_agent(worker_id)
            self.store.stop_agent(self.settings.agent_id)
        except BoardBusyError as exc:  # the rows go stale; cleanup_stale_agents handles them
            self.log.warning("board busy at shutdown, agent rows not marked stopped: %s", exc)
