"""Start-up recovery after a crash or SIGKILL of a previous team lead on this board.

No process of its attempts survives; the results its workers had finished are recorded (fenced like
any result); unfinished attempts go back to pending (counted as interruptions), their open attempt
rows are closed as released, and their staging copies are removed.
"""

from __future__ import annotations

from pathlib import Path

from ascendbridge.board import AttemptEnd, StaleTokenError, TaskRecord
from ascendbridge.config import adaptations_dir
from ascendbridge.stage_api import GateResult, StageOutcome
from ascendbridge.teamlead.dispatch import Dispatch
from ascendbridge.teamlead.state import Part, RunState
from ascendbridge.teamlead.verdicts import Verdicts, agent_backends
from ascendbridge.workers import attempt_dir, payload
from ascendbridge.workers.containment import kill_board_attempts
from ascendbridge.workers.executor import JobResult, PhaseResult


class Recovery(Part):
    """Take over the board a dead team lead left: kill, adopt or release, clean up."""

    def __init__(self, state: RunState, dispatch: Dispatch, verdicts: Verdicts) -> None:
        super().__init__(state)
        self.dispatch, self.verdicts = dispatch, verdicts

    def recover(self) -> None:
        """After a crash or SIGKILL of a previous team lead on this board: no process of its attempts
        survives, finished results are recorded, unfinished attempts go back to pending (counted as
        interruptions), and their staging copies are removed."""
        killed = kill_board_attempts(self.store.path)
        if killed:
            self.log.warning("killed %d process(es) left running by a previous team lead's attempts", killed)
        prefix = f"{self.settings.agent_id}.w"
        for task in self.store.list_tasks(status="in_progress"):
            if not (task.owner or "").startswith(prefix) or task.stage not in self.state.runnable:
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
        job = self.dispatch.job(task, self.store.get_model(task.model_id), 0, Path(log_path))
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
        outcome, diagnosis, fix = self.verdicts.judge(job, result)
        end = AttemptEnd(outcome, diagnosis=diagnosis, fix_applied=fix, agent_backend=agent_backends(result))
        self.store.finish_attempt(rows[-1].id, end)
        attempt_dir.discard(job.work_dir)
        self.log.info(
            "%s/%s: recorded the finished result of a previous team lead's attempt: %s",
            task.model_id,
            task.stage,
            outcome,
        )
        self.state.stats.outcomes[outcome] += 1
        return True
