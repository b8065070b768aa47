"""REVALIDATION_STAGE: one team-lead task per completed adaptation, on the current stack.

The re-validation script (adaptation/scripts/run_completed_adaptations.py) runs a team lead on a
board of its own whose `benchmark` slot is this stage (ASCENDBRIDGE_EXTRA_STAGES), so every
package gets the team lead's devices, containment, leases and attempt log. run: sync the
environment in the model's mode, healing's dry run (demo.py), then the Benchmark stage's run
and, when `adaptation.revalidation_optimize` is set, the Optimization stage's run; the Benchmark figures (with
their stack id) travel in the outcome and reach this board with the gated completion. gate: the Benchmark gate (and the Optimization gate) re-derive
those figures from the saved evidence. The comparison with the baseline is the script's job.
"""

from __future__ import annotations

from typing import Any

from adaptation import uv_env
from adaptation.settings import AdaptationSettings
from adaptation.spec import AdaptationSpec
from ascendbridge.envmode import use_model_env
from ascendbridge.settings import SettingsError, section
from ascendbridge.stage_api import GateResult, StageContext, StageOutcome
from benchmark.settings import BenchmarkSettings
from benchmark.stage import BENCHMARK_STAGE
from optimization.stage import OPTIMIZATION_STAGE


def _optimize() -> bool:
    """`--set adaptation.revalidation_optimize=true` (the stage runs in the benchmark slot, its
    own switch lives in the adaptation section)."""
    return section(AdaptationSettings).revalidation_optimize


def _failed(rule: str, summary: str, **extra: Any) -> StageOutcome:
    return StageOutcome("failed", summary, diagnosis={"rule": rule, "summary": summary, **extra})


class RevalidationStage:
    name = "benchmark"  # the slot it fills on the re-validation board

    def run(self, ctx: StageContext) -> StageOutcome:
        use_model_env(ctx.model)
        try:
            settings = BenchmarkSettings.from_sources(ctx.settings)
            AdaptationSpec.load(ctx.adaptation_dir)
        except SettingsError as exc:
            return StageOutcome("failed", str(exc), diagnosis=exc.diagnosis())
        except ValueError as exc:
            return _failed("revalidation_setup", str(exc))
        ctx.say(f"syncing the {settings.profile} environment")
        sync = uv_env.sync(ctx.adaptation_dir, settings.profile, timeout_s=settings.sync_timeout_s, log=ctx.log)
        if not sync.ok:
            return _failed("sync_failed", f"environment not made: {sync.tail(1)}", log_tail=sync.tail(20))
        ctx.say("healing dry run: demo.py --dry-run")
        demo = uv_env.run_demo(ctx.adaptation_dir, device=settings.device, log=ctx.log)
        if not demo.ok:
            error = (demo.result or {}).get("error") or f"exit {demo.command.exit_code}"
            return _failed("dry_run_failed", f"demo.py --dry-run failed: {error}", log_tail=demo.command.tail(30))
        bench = BENCHMARK_STAGE.run(ctx)
        if bench.status != "done":
            return bench
        result: dict[str, Any] = {"dry_run": demo.result, "benchmark": bench.result}
        if _optimize():
            opt = OPTIMIZATION_STAGE.run(ctx)
            if opt.status != "done":
                return opt
            result["optimization"] = opt.result
        # The Benchmark figures are what re-validation compares; the team lead writes them with the
        # gated completion (the Optimization's stay in `result`: this board's task is the benchmark's).
        return StageOutcome("done", bench.summary, result=result, metrics=bench.metrics)

    def gate(self, ctx: StageContext) -> GateResult:
        verdict = BENCHMARK_STAGE.gate(ctx)
        if not verdict.passed or not _optimize():
            return verdict
        opt = OPTIMIZATION_STAGE.gate(ctx)
        return GateResult(opt.passed, f"{verdict.summary}; {opt.summary}", {"benchmark": verdict.report,
                                                                             "optimization": opt.report})


REVALIDATION_STAGE = RevalidationStage()
