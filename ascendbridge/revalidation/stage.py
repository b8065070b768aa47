"""REVALIDATION_STAGE: one team-lead task per completed adaptation, on the current stack.

The re-validation script (scripts/run_completed_adaptations.py) runs a team lead on a
board of its own whose `benchmark` slot is this stage (ASCENDBRIDGE_EXTRA_STAGES), so every
package gets the team lead's devices, containment, leases and attempt log. run: sync the
environment in the model's mode, healing's dry run (demo.py), then the Benchmark stage's run
and, when `revalidation.optimize` is set, the Optimization stage's run (both loaded through their
entry points, never imported); the Benchmark figures (with
their stack id) travel in the outcome and reach this board with the gated completion. gate: the Benchmark gate (and the Optimization gate) re-derive
those figures from the saved evidence. The comparison with the baseline is the script's job.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field
from pydantic_settings import SettingsConfigDict

from ascendbridge.package import uv_env
from ascendbridge.package.device_settings import DeviceSettings
from ascendbridge.package.spec import AdaptationSpec
from ascendbridge.revalidation.settings import RevalidationSettings
from ascendbridge.settings import section
from ascendbridge.stage_api import GateResult, StageContext, StageOutcome, failed
from ascendbridge.stage_inputs import run_with_inputs
from ascendbridge.stage_registry import entry_point_stage


class BenchmarkSlotSettings(DeviceSettings):
    """The environment it syncs before the dry run: the benchmark's keys (device, sync timeout),
    since re-validation fills the benchmark's slot and its runs are the benchmark's."""

    model_config = SettingsConfigDict(env_prefix="ASCENDBRIDGE_BENCHMARK_")
    key_prefix = "benchmark_"

    sync_timeout_s: float = Field(uv_env.SYNC_TIMEOUT_S, gt=0)


def _optimize() -> bool:
    """`--set revalidation.optimize=true` (scripts/run_completed_adaptations.py --optimize)."""
    return section(RevalidationSettings).optimize


class RevalidationStage:
    name = "benchmark"  # the slot it fills on the re-validation board

    def run(self, ctx: StageContext) -> StageOutcome:
        return run_with_inputs(ctx, BenchmarkSlotSettings, "revalidation_setup", self._run)

    def _run(self, ctx: StageContext, settings: BenchmarkSlotSettings, spec: AdaptationSpec) -> StageOutcome:
        ctx.say(f"syncing the {settings.profile} environment")
        sync = uv_env.sync(ctx.adaptation_dir, settings.profile, timeout_s=settings.sync_timeout_s, log=ctx.log)
        if not sync.ok:
            return failed(f"environment not made: {sync.tail(1)}", "sync_failed", log_tail=sync.tail(20))
        ctx.say("healing dry run: demo.py --dry-run")
        demo = uv_env.run_demo(ctx.adaptation_dir, device=settings.device, log=ctx.log)
        if not demo.ok:
            error = (demo.result or {}).get("error") or f"exit {demo.command.exit_code}"
            return failed(f"demo.py --dry-run failed: {error}", "dry_run_failed", log_tail=demo.command.tail(30))
        bench = entry_point_stage("benchmark").run(ctx)
        if bench.status != "done":
            return bench
        result: dict[str, Any] = {"dry_run": demo.result, "benchmark": bench.result}
        if _optimize():
            opt = entry_point_stage("optimization").run(ctx)
            if opt.status != "done":
                return opt
            result["optimization"] = opt.result
        # The Benchmark figures are what re-validation compares; the team lead writes them with the
        # gated completion (the Optimization's stay in `result`: this board's task is the benchmark's).
        return StageOutcome("done", bench.summary, result=result, metrics=bench.metrics)

    def gate(self, ctx: StageContext) -> GateResult:
        verdict = entry_point_stage("benchmark").gate(ctx)
        if not verdict.passed or not _optimize():
            return verdict
        opt = entry_point_stage("optimization").gate(ctx)
        return GateResult(
            opt.passed, f"{verdict.summary}; {opt.summary}", {"benchmark": verdict.report, "optimization": opt.report}
        )


REVALIDATION_STAGE = RevalidationStage()
