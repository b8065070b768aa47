"""HEALING_STAGE: the team lead's entry point to the healer (ascendbridge.stage_api.Stage).

run(ctx) first applies the team lead's open directives (a later stage's finding that needs a spec
change, directives.py), then heals the adaptation the Adaptation stage rendered (see loop.py) and proposes
done / failed / blocked with the diagnosis and every attempt; gate(ctx) re-verifies
independently (see gate.py). Nothing here trusts what run() said.
"""

from __future__ import annotations

from ascendbridge.envmode import use_model_env
from ascendbridge.package.spec import AdaptationSpec
from ascendbridge.stage_api import GateResult, StageContext, StageOutcome, failed
from ascendbridge.stage_inputs import run_with_inputs
from healing.agent_escalation import install as install_agent_escalators
from healing.context import fix_context
from healing.directives import apply_directives
from healing.gate import healing_gate
from healing.loop import heal
from healing.settings import HealingSettings

install_agent_escalators()  # memory of past fixes, then the healer's LLM backend (builtin: none)


class HealingStage:
    name = "healing"

    def run(self, ctx: StageContext) -> StageOutcome:
        return run_with_inputs(ctx, HealingSettings, "bad_input", self._run)

    def _run(self, ctx: StageContext, settings: HealingSettings, spec: AdaptationSpec) -> StageOutcome:
        fixes_ctx = fix_context(spec, ctx.model.allow_remote_code, ctx.model.metadata)
        directed, broken = apply_directives(ctx.adaptation_dir, ctx.directives, fixes_ctx, ctx.say, ctx.log)
        if broken is not None:
            return failed(broken, "directive_failed")
        report = heal(ctx.adaptation_dir, settings, fixes_ctx, ctx.say, ctx.log)
        fixes = directed + report.fixes
        result = {
            "attempts": [a.as_dict() for a in report.attempts],
            "fixes": fixes,
            "device": settings.device,
            "profile": settings.profile,
            "dry_run": report.dry_run,
            "real_run": report.real_run,
            "real_weights": report.real_run is not None,
            "real_weights_reason": report.real_weights_reason,
        }
        return StageOutcome(
            status=report.status,
            summary=report.summary,
            result=result,
            diagnosis=report.diagnosis,
            fix_applied="; ".join(fixes) or None,
        )

    def gate(self, ctx: StageContext) -> GateResult:
        use_model_env(ctx.model)
        try:
            settings = HealingSettings.from_sources(ctx.settings)
        except ValueError as exc:
            return GateResult(False, str(exc))
        passed, summary, report = healing_gate(
            ctx.adaptation_dir, ctx.model.adaptation_name, settings.device, settings.demo_timeout_s
        )
        return GateResult(passed, summary, report)


HEALING_STAGE = HealingStage()
