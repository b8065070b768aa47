"""A task's transitions the team lead records: completion, failure and retry, an inconclusive gate,
a spec change sent back to healing. Each is one fenced write (the task's token): a lease lost meanwhile
raises StaleTokenError and nothing is recorded.

A failed attempt retries while the stage's budget lasts; a refusal (ascendbridge/refusals.py) and the
same error on two attempts in a row are final at once. An inconclusive gate spends no attempt: the
staging copy waits for a re-check of the gate alone (Recheck), up to `gate_rechecks` times.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from typing import Any

from ascendbridge.board import BoardBusyError, BoardError, NewEvent, StaleTokenError, TaskRecord
from ascendbridge.refusals import UNLISTED_REMEDY, is_refusal
from ascendbridge.reuse.record import INPUTS_KEY, completion_record
from ascendbridge.stage_api import GateResult, StageOutcome
from ascendbridge.stage_table import StageTableError
from ascendbridge.teamlead.state import Part, Recheck
from ascendbridge.workers import attempt_dir, payload
from ascendbridge.workers.executor import Job

Verdict = tuple[str, dict[str, Any] | None, str | None]  # attempt outcome, diagnosis, fix applied


class Transitions(Part):
    """The team lead's fenced writes about one task, and the decisions they carry."""

    def complete(self, job: Job, out: StageOutcome, verdict: GateResult) -> Verdict:
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
            result[INPUTS_KEY] = self._inputs(job)
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
            diag = with_unverified(
                {"rule": "bad_stage_figures", "summary": f"the stage's figures were refused: {exc}"}, out
            )
            return (*self.failure(job, diag, events), fix)
        self.log.info("%s: completed (gate passed: %s)", name, verdict.summary)
        return "completed", None, fix

    def _inputs(self, job: Job) -> dict[str, Any]:
        """What the stage read and the package its gate passed, for the next main job's reuse check
        (ascendbridge/reuse/); an input that cannot be read is recorded as such: the stage re-runs."""
        tasks = self.store.list_tasks(model_id=job.task.model_id)
        try:
            return completion_record(job.model, job.stage, tasks, job.settings, job.adaptation_dir, job.task.started_at)
        except (OSError, ValueError, StageTableError) as exc:
            self.log.warning("%s/%s: inputs not recorded (it re-runs next time): %s", job.task.model_id, job.stage, exc)
            return {"error": str(exc)}

    def _promote(self, job: Job) -> None:
        """Swap the gated staging copy in, holding the board's write lock with the token checked
        (StaleTokenError: nothing is promoted). A retry after a busy board finds it done."""
        if not job.work_dir.is_dir():
            return
        with self.store.while_owned(job.task.id, job.token, self.settings.lease_s):
            attempt_dir.promote(job.work_dir, job.adaptation_dir)

    def failure(
        self, job: Job, diag: dict[str, Any], events: Sequence[dict[str, Any]] = ()
    ) -> tuple[str, dict[str, Any]]:
        """A failed attempt: retry while the stage's budget lasts, then mark failed. A refusal
        (ascendbridge/refusals.py: a retry cannot change it) fails on its first attempt, and so does
        the error the previous attempt ended with too. Returns the outcome and the diagnosis."""
        diag = live_paths(job, diag)
        if not is_refusal(diag):
            diag = self._same_error_twice(job, diag)
        final = is_refusal(diag) or job.attempt >= self.settings.budget(job.stage)
        self.fail(job.task, {**diag, "log_path": str(job.log_path)}, final=final, events=events)
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

    def inconclusive(
        self, job: Job, out: StageOutcome, verdict: GateResult, events: Sequence[dict[str, Any]]
    ) -> tuple[str, dict[str, Any]]:
        """The gate could not decide: no attempt spent, the stage not run again. Its staging copy waits,
        under the lease, for a re-check of the gate alone after a backoff; after `gate_rechecks` of them
        the task fails with the gate's last reason. Returns the outcome and the diagnosis."""
        done, limit = job.recheck, self.settings.gate_rechecks
        reason = verdict.summary
        if done >= limit:
            diag = with_unverified(
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
            self.fail(job.task, {**diag, "log_path": str(job.log_path)}, final=True, events=events)
            return "failed", diag
        delay = self.settings.gate_recheck_s * 2**done
        self.state.rechecks[job.task.id] = Recheck(job, out, done, time.monotonic() + delay)
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
        self.job_event(
            job,
            "gate_inconclusive",
            message,
            {"attempt": job.attempt, "recheck": done + 1, "rechecks": limit, "delay_s": delay, "reason": reason},
        )
        self.log.warning("%s/%s: %s", job.task.model_id, job.stage, message.split(": ", 1)[1])
        return "inconclusive", diag

    def job_event(self, job: Job, kind: str, message: str, data: dict[str, Any] | None = None) -> None:
        """An event of the team lead's about one attempt: under its model and stage, with its token."""
        data = {**(data or {}), "token": job.token}
        self.store.add_event(NewEvent(kind, message, job.task.model_id, job.stage, data, self.settings.agent_id))

    def send_back(
        self, job: Job, diag: dict[str, Any], change: dict[str, Any], events: Sequence[dict[str, Any]] = ()
    ) -> str:
        """The run found what only a spec change fixes: this attempt fails, the healer gets the
        finding as a directive and the model rolls back to healing (guidance.send_back); the stage
        runs again after the healer's fix. A board that refuses the rollback leaves the failure.
        Returns the attempt's outcome: `sent_back`, or `failed` when the rollback was refused."""
        name = f"{job.task.model_id}/{job.stage}"
        self.fail(job.task, {**diag, "log_path": str(job.log_path), "spec_change": change}, final=True, events=events)
        steering = self.state.steering
        if steering is None:
            self.log.warning("%s: spec change not sent back to healing: no steering on this board", name)
            return "failed"
        try:
            steering.send_back(job.task.model_id, job.stage, change, self.settings.agent_id)
        except (StaleTokenError, BoardBusyError):
            raise
        except BoardError as exc:
            self.log.warning("%s: spec change not sent back to healing: %s", name, exc)
            return "failed"
        self.log.info("%s: sent back to healing: %s", name, change.get("summary", ""))
        return "sent_back"  # not a failure of this run: the stage waits for the healer's fix

    def end_unstarted(self, task: TaskRecord, diag: dict[str, Any], status: str = "failed") -> None:
        """Fail or block a claimed task before any attempt of it starts, counted in this run's outcomes
        as a judged attempt is (the exit code says a task failed or was blocked in this run)."""
        self.fail(task, diag, final=True, status=status)
        self.state.stats.outcomes[status] += 1

    def fail(
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


def live_paths(job: Job, diag: dict[str, Any]) -> dict[str, Any]:
    """A diagnosis naming the adaptation directory, not the attempt's staging copy (discarded with
    the attempt, and named after its token): what a person can open, and the same words on every
    attempt, so the same error twice is seen as such."""
    return attempt_dir.relocate(diag, job.work_dir, job.adaptation_dir)


def _error_key(diag: dict[str, Any]) -> tuple[object, object, object]:
    """What makes two failures the same error: its rule, exception class and message."""
    return diag.get("rule"), diag.get("exception"), diag.get("summary")


def with_unverified(diag: dict[str, Any], out: StageOutcome) -> dict[str, Any]:
    """A diagnosis that keeps what the run proposed for the board, labelled unverified: the
    attempt record shows it; the model's figures never include it."""
    proposed = {
        key: value
        for key, value in payload.to_data(out).items()
        if key in ("metrics", "model_fields", "model_metadata") and value
    }
    return {**diag, "unverified": proposed} if proposed else diag
