"""Recording a finished job: its verdict (what the run proposed, what the gate said), the task's
transition, and the attempt's row; then its worker slot and devices are free again.

A verdict is never dropped: a busy board is retried for a minute, then the result waits for the next
tick (RunState.unrecorded). A result that arrives after its lease was lost is discarded as stale.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from ascendbridge.agents.history import backends_used
from ascendbridge.board import AttemptEnd, BoardBusyError, BoardError, StaleTokenError
from ascendbridge.refusals import as_refusal, is_refusal
from ascendbridge.stage_api import StageOutcome
from ascendbridge.teamlead.state import Part, RunState
from ascendbridge.teamlead.transitions import Transitions, Verdict, live_paths, with_unverified
from ascendbridge.workers import attempt_dir, oom, payload
from ascendbridge.workers.busy import retry_busy
from ascendbridge.workers.cost import attempt_profile
from ascendbridge.workers.executor import Job, JobResult, PhaseResult


class Verdicts(Part):
    """Judge a finished job and record it: the task's transition and the attempt's end."""

    def __init__(self, state: RunState, transitions: Transitions) -> None:
        super().__init__(state)
        self.transitions = transitions

    def finish(self, result: JobResult) -> None:
        """Record a finished job (or keep it for the next tick while the board stays busy)."""
        state = self.state
        job, attempt_id, slot = state.jobs[result.job.task.id]
        name = f"{job.task.model_id}/{job.stage}"
        profile, peak_rss = attempt_profile(result)  # before a re-check borrows its attempt's run
        if job.gate_only:  # judged with the run it re-checks (some executors report an early crash as the run's)
            early = result.run
            gate = result.gate or (
                PhaseResult(
                    early.exit_code,
                    early.duration_s,
                    early.timed_out,
                    None,
                    early.log_tail,
                    early.refused,
                    early.memory,
                )
                if early is not None
                else None
            )
            result = replace(result, run=PhaseResult(None, 0.0, False, state.rechecks[job.task.id].outcome), gate=gate)
        try:  # a verdict is never dropped: after a minute of a busy board, it waits for the next tick
            outcome, diagnosis, fix = retry_busy(
                lambda: self.judge(job, result), f"recording {name}", self.log.warning, give_up_after_s=60.0
            )
        except BoardBusyError as exc:
            self.log.error("%s: board still busy, the result waits (%s): %s", name, job.result_path("gate").parent, exc)
            state.unrecorded.append(result)
            return
        state.jobs.pop(result.job.task.id)
        state.lost.discard(job.task.id)
        state.free_slots.append(slot)
        if job.placement is not None:
            state.pool.release(job.placement)
        if outcome != "inconclusive":  # an inconclusive gate's copy waits for its re-check
            state.rechecks.pop(job.task.id, None)
            attempt_dir.discard(job.work_dir)  # promoted already when it passed its gate
        # The phase that decided the outcome: the gate when it ran, else the stage's run.
        decisive = result.gate or result.run
        exit_code = decisive.exit_code if decisive else None
        end = AttemptEnd(
            outcome,
            exit_code,
            result.duration_s,
            diagnosis,
            fix,
            agent_backend=agent_backends(result),
            cost_profile=profile,
            peak_rss_bytes=peak_rss,
        )
        try:
            retry_busy(
                lambda: self.store.finish_attempt(attempt_id, end),
                f"recording the attempt of {name}",
                self.log.warning,
                give_up_after_s=60.0,
            )
        except BoardError as exc:
            self.log.error("%s/%s: could not record the attempt: %s", job.task.model_id, job.stage, exc)
        state.idle.add(job.worker_id)
        state.stats.outcomes[outcome] += 1
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
            self.transitions.job_event(
                job,
                "attempt_placement",
                f"{job.stage} attempt {job.attempt} ran on {where.get('host', '?')} {devices or 'CPU'}",
                {**where, "attempt": job.attempt},
            )
        except BoardError as exc:  # the verdict is recorded; a lost placement line is only logged
            self.log.warning("%s/%s: placement not recorded: %s", job.task.model_id, job.stage, exc)

    def judge(self, job: Job, result: JobResult) -> Verdict:
        """Decide the transition; returns (attempt outcome, diagnosis, fix applied)."""
        name = f"{job.task.model_id}/{job.stage}"
        if result.stopped or result.lost:
            return self._released(job, result)
        run = result.run or PhaseResult(None, 0.0, False, None)
        out = run.data
        fix = out.fix_applied if out else None
        try:
            if out is None:
                return (*self.transitions.failure(job, _crash_diagnosis("run", run, job)), fix)
            if out.status == "done":
                return self._gated(job, out, result.gate or PhaseResult(None, 0.0, False, None))
            return self._not_done(job, out)
        except StaleTokenError as exc:
            self.log.warning("%s: result discarded, the lease was lost: %s", name, exc)
            self.transitions.job_event(
                job,
                "stale_result_discarded",
                f"{job.stage}: result of attempt {job.attempt} (token {job.token}) discarded, its lease was lost",
            )
            return "stale", {"rule": "lease_lost", "summary": str(exc)}, fix

    def _released(self, job: Job, result: JobResult) -> Verdict:
        """The job was stopped (shutdown) or its host lost: the task goes back to pending."""
        name = f"{job.task.model_id}/{job.stage}"
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

    def _gated(self, job: Job, out: StageOutcome, gate: PhaseResult[Any]) -> Verdict:
        """The run says done: the gate's verdict decides."""
        events = [payload.to_data(e) for e in out.events]
        verdict = gate.data
        if verdict is None:
            diag = _crash_diagnosis("gate", gate, job)
        elif verdict.passed:
            return self.transitions.complete(job, out, verdict)
        elif verdict.inconclusive:
            return (*self.transitions.inconclusive(job, out, verdict, events), out.fix_applied)
        else:
            diag = {"rule": "gate_failed", "summary": f"gate failed: {verdict.summary}", "gate": verdict.report}
        diag = with_unverified(diag, out)
        return (*self.transitions.failure(job, diag, events), out.fix_applied)

    def _not_done(self, job: Job, out: StageOutcome) -> Verdict:
        """The run did not finish its work: failed (retried, or sent back to healing), blocked or skipped."""
        fix = out.fix_applied
        events = [payload.to_data(e) for e in out.events]
        diag = dict(out.diagnosis or {})
        diag.setdefault("rule", f"stage_{out.status}")
        diag.setdefault("summary", out.summary)
        if is_refusal(diag):  # deterministic: recorded with its remedy, never retried
            diag = as_refusal(diag)
        if out.status == "failed" and out.spec_change:
            diag = with_unverified(diag, out)
            return self.transitions.send_back(job, diag, out.spec_change, events), diag, fix
        if out.status in ("blocked", "skipped"):  # the program's decision: its metadata says why
            figures_only = StageOutcome(out.status, out.summary, metrics=out.metrics)
            diag = live_paths(job, with_unverified(diag, figures_only))  # figures never stored
            self.transitions.fail(
                job.task, diag, status=out.status, fields=out.model_fields, metadata=out.model_metadata, events=events
            )
            return out.status, diag, fix
        diag = with_unverified(diag, out)
        return (*self.transitions.failure(job, diag, events), fix)


def agent_backends(result: JobResult) -> str:
    """Which agent backends acted in the attempt, from the agent runs its stage's outcome reports."""
    out = result.run.data if result.run else None
    return backends_used(out.events if isinstance(out, StageOutcome) else ())


def _crash_diagnosis(phase: str, res: PhaseResult[Any], job: Job) -> dict[str, Any]:
    """Why a phase ended without a result: its timeout, a result that broke the schema, or a crash
    (for memory, when the executor judged it so)."""
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
    crashed = {
        "rule": f"{phase}_crashed",
        "summary": f"{phase} worker exited with code {res.exit_code} without a result",
        "exit_code": res.exit_code,
        "log_tail": res.log_tail[-2000:],
        "log_path": str(job.log_path),
    }
    if res.memory:  # killed for memory, not stopped by the team lead: a retry with the same plan meets it again
        return oom.diagnosis(crashed, {"command": f"the {phase} worker", "evidence": res.memory})
    return crashed


def _append(path: Path, text: str) -> None:
    try:
        with path.open("a", encoding="utf-8") as fh:
            fh.write(text)
    except OSError:
        pass
