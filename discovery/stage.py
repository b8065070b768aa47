"""DISCOVERY_STAGE: the first stage of the pipeline (entry point `ascendbridge.stages`).

run() reads the model's metadata from its source, decides proceed / skip / block with a reason,
and leaves its evidence in a file for the gate. gate() re-derives the evidence independently.
"""

from __future__ import annotations

from typing import Any

from ascendbridge.discovery.config_estimate import proxy_depth_problem
from ascendbridge.discovery.decisions import decide, weight_bytes
from ascendbridge.discovery.discover import discover
from ascendbridge.discovery.errors import DiscoveryError
from ascendbridge.discovery.hub import hub_token
from ascendbridge.discovery.model_info import ModelInfo
from ascendbridge.discovery.render import summary_lines
from ascendbridge.stage_api import GateResult, OutcomeStatus, StageContext, StageOutcome
from discovery.evidence import evidence_path, read_evidence, write_evidence
from discovery.gate import verify

STATUS_OF_ACTION: dict[str, OutcomeStatus] = {"proceed": "done", "skip": "skipped", "block": "blocked"}
# Errors only a person can resolve (retrying would fail the same way): blocked, not failed.
BLOCKING_RULES = frozenset({"gated_no_token"})
PROXY_RULE = "proxy_depth_invalid"  # a registered --depth the model's layers cannot give (ascendbridge/refusals.py)


def model_fields(info: ModelInfo) -> dict[str, Any]:
    """The board's metadata columns (BoardStore.METADATA_FIELDS), written with the gated completion."""
    return {
        "architecture": info.architectures[0] if info.architectures else info.model_class,
        "model_type": info.model_type,
        "task_family": info.task_family,
        "parameter_count": info.parameter_count,
        "dtype": info.dtype,
        "size_bytes": info.size_bytes,
        "license": info.license,
        "gated": info.gated,
    }


class DiscoveryStage:
    name = "discovery"

    def run(self, ctx: StageContext) -> StageOutcome:
        m = ctx.model
        ctx.say(f"discovering {m.model_id} (source {m.source}{', path ' + m.path if m.path else ''})")
        try:
            info = discover(m.model_id, m.source, m.path, m.revision)
            info.decision = decide(info, m.allow_remote_code, has_token=bool(hub_token()))
        except DiscoveryError as exc:
            ctx.say(f"error: {exc}")
            status: OutcomeStatus = "blocked" if exc.rule in BLOCKING_RULES else "failed"
            return StageOutcome(status=status, summary=str(exc), diagnosis={"rule": exc.rule, "summary": str(exc)})
        if problem := proxy_depth_problem(m.proxy_depth, info.config):
            summary = f"{m.model_id}: {problem}"
            ctx.say(f"error: {summary}")
            return StageOutcome(status="failed", summary=summary, diagnosis={"rule": PROXY_RULE, "summary": summary})
        for line in summary_lines(info) + [f"warning: {w}" for w in info.warnings]:
            ctx.say(line)
        decision = info.decision
        ctx.say(f"decision: {decision.action}: {decision.reason}")
        metadata = info.model_dump(mode="json")
        path = evidence_path(m.adaptation_name, ctx.task.fencing_token)
        write_evidence(path, metadata)
        status = STATUS_OF_ACTION[decision.action]
        return StageOutcome(
            status=status,
            summary=decision.reason,
            result={
                "decision": decision.model_dump(),
                "evidence": str(path),
                "weight_bytes": weight_bytes(info),
                "warnings": info.warnings,
            },
            diagnosis=None if status == "done" else {"rule": decision.rule, "summary": decision.reason},
            model_fields=model_fields(info),
            model_metadata=metadata,
        )

    def gate(self, ctx: StageContext) -> GateResult:
        path = evidence_path(ctx.model.adaptation_name, ctx.task.fencing_token)
        try:
            info = ModelInfo.model_validate(read_evidence(path))
        except (OSError, ValueError) as exc:
            return GateResult(
                False, f"no readable discovery evidence at {path} ({type(exc).__name__})", {"evidence": str(path)}
            )
        checks = verify(info, ctx.model)
        for c in checks.items:
            ctx.say(f"gate {'ok  ' if c['ok'] else 'FAIL'} {c['check']}: {c['detail']}")
        return GateResult(not checks.failed, checks.summary, {"evidence": str(path), "checks": checks.items})


DISCOVERY_STAGE = DiscoveryStage()
