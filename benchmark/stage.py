"""The Benchmark stage: render accuracy_run.py, run it per dtype in the adaptation's env, record.

run: renders `accuracy_run.py` into the adaptation, syncs the device profile's environment and
runs the script once per dtype (spec target first, then bfloat16 by default) through uv; every
run's figures travel in the outcome (the team lead writes them with the gate's completion). gate: `benchmark/scripts/check_accuracy_run.py`
as a separate process, which re-derives the figures from the saved outputs.
"""

from __future__ import annotations

from typing import Any

from ascendbridge.envmode import use_model_env
from ascendbridge.gatekit.checker import package_gate
from ascendbridge.memory_plan import MemoryPlan, Room, accuracy_plan
from ascendbridge.package import uv_env
from ascendbridge.package.generator import GeneratorError, update_readme_results
from ascendbridge.package.spec import AdaptationSpec
from ascendbridge.package.weights import weights_available
from ascendbridge.stage_api import FigureSet, GateResult, StageContext, StageOutcome
from ascendbridge.stage_inputs import memory_planned, run_with_inputs, synced_env
from ascendbridge.workers.host_memory import built_parameters
from benchmark.op_coverage import PROFILE as OP_PROFILE
from benchmark.op_coverage import record_and_report
from benchmark.readme import results_markdown
from benchmark.render import render_accuracy_run
from benchmark.settings import BenchmarkSettings

DTYPE_RULE = "dtype_unsupported"  # the healer's rule that keeps a refusing module in float32


def _accuracy_argv(settings: BenchmarkSettings, dtype: str, pretrained: bool, op_profile: bool = False) -> list[str]:
    argv = [
        "accuracy_run.py",
        "--device",
        settings.device,
        "--dtype",
        dtype,
        "--warmup",
        str(settings.warmup),
        "--iters",
        str(settings.iters),
        "--budget-s",
        str(settings.budget_s),
        "--num-samples",
        str(settings.num_samples),
    ]
    argv += ["--op-profile", OP_PROFILE] if op_profile else []
    argv += ["--workload", settings.workload] if settings.workload else []
    return argv + (["--use-pretrained"] if pretrained else [])


WORKLOAD_UNITS = {
    "ttft_ms": "ms",
    "tpot_ms": "ms",
    "tokens_per_s": "tokens/s",
    "batch_tokens_per_s": "tokens/s",
    "decode_bandwidth_gbs": "GB/s",
    "throughput_samples_per_s": "samples/s",
    "knee_samples_per_s": "samples/s",
    "batch1_latency_ms": "ms",
}


def board_figures(
    result: dict[str, Any], probe_bandwidth_gbs: float | None = None
) -> tuple[dict[str, float], dict[str, str]]:
    """The numeric figures of one accuracy_run RESULT, for the outcome's FigureSet: the forward's,
    the workload's headline (TTFT / TPOT / tokens/s, or sweep throughput) and the decode bandwidth
    as a percentage of the environment probe's measured bandwidth on that device kind."""
    values: dict[str, float] = {}
    units: dict[str, str] = {}
    for key, unit in (
        ("median_ms", "ms"),
        ("min_ms", "ms"),
        ("p90_ms", "ms"),
        ("reference_median_ms", "ms"),
        ("samples_per_s", "samples/s"),
        ("peak_memory_bytes", "bytes"),
    ):
        if isinstance(result.get(key), (int, float)):
            values[key] = float(result[key])
            units[key] = unit
    values["accuracy_pass"] = 1.0 if result.get("verdict") == "pass" else 0.0
    workload = result.get("workload_figures") or {}
    for key, unit in WORKLOAD_UNITS.items():
        if isinstance(workload.get(key), (int, float)):
            values[key], units[key] = float(workload[key]), unit
    if isinstance(workload.get("peak_memory_bytes"), (int, float)):
        values["workload_peak_memory_bytes"], units["workload_peak_memory_bytes"] = (
            float(workload["peak_memory_bytes"]),
            "bytes",
        )
    if "decode_bandwidth_gbs" in values and probe_bandwidth_gbs:
        values["decode_bandwidth_pct"] = 100.0 * values["decode_bandwidth_gbs"] / probe_bandwidth_gbs
        units["decode_bandwidth_pct"] = "% of probe bandwidth"
    return values, units


def spec_change(finding: dict[str, Any], spec: AdaptationSpec) -> dict[str, Any] | None:
    """What the healer must change for a located dtype refusal: keep the module's class in float32
    (its rule, DTYPE_RULE). None when the class is already kept: the island did not help, and the
    dtype's evidence set is left out instead."""
    module_class = finding.get("module_class")
    if not module_class or module_class in spec.dtype.keep_fp32_modules:
        return None
    return {
        "rule": DTYPE_RULE,
        "finding": finding,
        "summary": f"{finding.get('dtype')} needs a spec change: a float32 island for {module_class} "
        f"({finding.get('module')}: {finding.get('operator') or 'an operator'} refuses "
        f"{finding.get('dtype')} on {finding.get('device')})",
    }


def island_findings(spec: AdaptationSpec, runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The healer's float32 islands (DTYPE_RULE fixes) that let a lower-precision run pass: kept."""
    fixes = [f.description for f in spec.applied_fixes if f.rule == DTYPE_RULE]
    return [
        {
            "dtype": r["dtype"],
            "device": r["device"],
            "module_class": ", ".join(r["keep_fp32_modules"]),
            "remedy": "; ".join(fixes),
            "kept": True,
            "summary": f"{', '.join(r['keep_fp32_modules'])} kept in float32 inside {r['dtype']} runs on "
            f"{r['device']}; remedy applied: {'; '.join(fixes) or 'spec keep_fp32_modules'}; "
            f"the {r['dtype']} evidence set is kept",
        }
        for r in runs
        if r.get("keep_fp32_modules") and r.get("dtype") != "float32"
    ]


def dtype_finding(result: dict[str, Any], remedy: str | None, kept: bool) -> dict[str, Any]:
    """What the board and the report show for an operator that refused a dtype: kept (the remedy
    made the dtype run, its evidence set is kept) or not (the dtype's set is left out)."""
    found = result["finding"]
    outcome = (
        f"remedy applied: {remedy}; the {found.get('dtype')} evidence set is kept"
        if kept
        else f"{remedy or 'no remedy tried'}; the {found.get('dtype')} evidence set is left out"
    )
    summary = (
        f"{found.get('operator') or 'an operator'} in {found.get('module')} ({found.get('module_class')}) "
        f"refuses {found.get('dtype')} on {found.get('device')} ({found.get('error')}); {outcome}"
    )
    return {**found, "remedy": remedy, "kept": kept, "summary": summary}


def probe_bandwidth(ctx: StageContext, device_kind: str) -> float | None:
    """The copy bandwidth (GB/s) of the board's last environment probe on `device_kind`, if any."""
    from benchmark.probe import latest_probe

    board = ctx.read_board()
    if board is None:  # no board on this host: the percentage is simply not computed
        return None
    try:
        probe = latest_probe(board, device_kind)
    finally:
        board.close()
    value = ((probe or {}).get("peaks") or {}).get("bandwidth_gbs")
    return float(value) if isinstance(value, (int, float)) and value > 0 else None


def _diagnosis(dtype: str, command: Any, result: dict[str, Any] | None) -> dict[str, Any]:
    error = command.why_failed(result)
    return {
        "rule": "benchmark_run_failed",
        "summary": f"accuracy_run.py ({dtype}) failed: {error}",
        "dtype": dtype,
        "log_tail": command.tail(30),
    }


class BenchmarkStage:
    name = "benchmark"

    def run(self, ctx: StageContext) -> StageOutcome:
        return run_with_inputs(ctx, BenchmarkSettings, "benchmark_setup", self._run)

    def _run(self, ctx: StageContext, settings: BenchmarkSettings, spec: AdaptationSpec) -> StageOutcome:
        pretrained = settings.real_weights and weights_available(spec)[0]

        def plan(parameters: int, room: Room) -> MemoryPlan:  # the harness keeps its reference in memory
            built = built_parameters(parameters, pretrained)
            dtypes = settings.dtypes_for(spec.dtype.target)
            return accuracy_plan(self.name, built, dtypes, room, can_store_reference=False)

        memory = memory_planned(ctx, settings.device, plan)
        if isinstance(memory, StageOutcome):
            return memory
        render_accuracy_run(spec, ctx.adaptation_dir)
        ctx.say("accuracy_run.py rendered")
        env = synced_env(ctx, spec, settings.profile, settings.real_weights, settings.sync_timeout_s)
        if isinstance(env, StageOutcome):
            return env
        stack, pretrained = env
        runs: list[dict[str, Any]] = []
        figures: list[FigureSet] = []
        findings: list[dict[str, Any]] = []
        for dtype in settings.dtypes_for(spec.dtype.target):
            result, failure = self._run_dtype(ctx, settings, dtype, pretrained, dtype == spec.dtype.target)
            if failure is not None:
                finding = (result or {}).get("finding")
                if dtype == spec.dtype.target or not finding:
                    return StageOutcome(
                        "failed",
                        f"accuracy_run.py failed for {dtype}",
                        result={"runs": runs, "dtype_findings": findings},
                        diagnosis=failure,
                    )
                change = spec_change(finding, spec)
                if change is not None:  # the healer's to fix; this stage runs again after it
                    ctx.say(f"finding: {change['summary']}; back to healing")
                    return StageOutcome(
                        "failed",
                        change["summary"],
                        result={"runs": runs, "dtype_findings": findings},
                        diagnosis={**failure, "rule": "spec_change_needed", "summary": change["summary"]},
                        spec_change=change,
                    )
                remedy = "no remedy left: the module is already kept in float32"
                assert result is not None  # a finding comes in a run's result
                findings.append(dtype_finding(result, remedy, kept=False))
                ctx.say(f"finding: {findings[-1]['summary']}")
                continue
            assert result is not None
            values, units = board_figures(result, probe_bandwidth(ctx, result["device"]))
            # Stack id: every figure names the stack it was measured on (stacks.stack_id).
            figures.append(FigureSet(values, device=result["device"], dtype=dtype, units=units, stack=stack))
            runs.append(result)
            for line in result.get("budget_ended") or []:  # said, and kept in the run's result
                ctx.say(f"{dtype}: {line}")
        for kept in island_findings(spec, runs):
            findings.append(kept)
            ctx.say(f"finding: {kept['summary']}")
        coverage = record_and_report(ctx, recorded=any(r.get("op_profile") for r in runs))  # docs/operators.md
        try:
            update_readme_results(ctx.adaptation_dir, results_markdown(runs))
        except (GeneratorError, OSError) as exc:
            ctx.say(f"README not updated: {exc}")
        summary = "; ".join(
            [f"{r['device']} {r['dtype']}: median {r['median_ms']:.2f} ms, accuracy {r['verdict']}" for r in runs]
            + [f"finding: {f['summary']}" for f in findings]
        )
        return StageOutcome(
            "done",
            summary,
            result={
                "runs": runs,
                "mode": runs[0]["mode"] if runs else None,
                "stack": stack,
                "dtype_findings": findings,
                "op_coverage": coverage,
                "reference_fp64": {r["dtype"]: r.get("reference_fp64") for r in runs},
                "memory_plan": memory.evidence() if memory else None,
            },
            metrics=figures,
        )

    def _run_dtype(
        self, ctx: StageContext, settings: BenchmarkSettings, dtype: str, pretrained: bool, op_profile: bool = False
    ) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
        """One dtype's accuracy_run.py: (RESULT, failure diagnosis or None). A refusing operator's
        finding is in the RESULT; the stage never changes the spec itself (spec_change)."""
        ctx.say(f"accuracy_run.py --device {settings.device} --dtype {dtype} ...")
        command = uv_env.run_in_env(
            ctx.adaptation_dir,
            _accuracy_argv(settings, dtype, pretrained, op_profile),
            timeout_s=settings.timeout_s,
            log=ctx.log,
        )
        result = uv_env.parse_result(command.output)
        if command.exit_code in (0, 2) and result and result.get("ok"):
            return result, None
        return result, _diagnosis(dtype, command, result)

    def gate(self, ctx: StageContext) -> GateResult:
        use_model_env(ctx.model)
        return package_gate(self.name, ctx.adaptation_dir)


BENCHMARK_STAGE = BenchmarkStage()
