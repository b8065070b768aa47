"""The Optimization stage: search the pass catalogue, render and run accuracy_run_perf.py, record.

run: syncs the device profile's environment, runs the search (`python -m ab_runtime.optimize`)
in the adaptation, which selects a configuration and then confirms it in a fresh paired run
(ab_runtime.optimize.confirm) before it writes optimization_notes.json; renders accuracy_run_perf.py with
the confirmed passes (none: "no gain", the run is then the baseline itself), runs it on the
workload the search optimized (generation: TPOT / tokens/s, with the decode passes), records
the perf run in the notes and the confirmed figures on the board. The search's confirmation (a
fresh process) writes the perf evidence itself from its own pairs (`--perf-evidence`), so the
chosen configuration is built and compiled once after the search, not twice; accuracy_run_perf.py
runs here only when nothing is chosen. gate: check_optimization_notes.py and
check_accuracy_run_perf.py as separate processes; an inconclusive perf gate (exit 3) is returned
as GateResult.inconclusive.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from ab_runtime.accuracy_standard import accuracy_summary
from ab_runtime.fileops import write_text_atomic
from ab_runtime.metrics_file import EvidenceError, read_metrics
from ab_runtime.optimize.notes_file import NOTES_FILE, read_notes
from ab_runtime.result import EXIT_BAD_INPUT
from ascendbridge.config import RUNTIME_DIR
from ascendbridge.envmode import use_model_env
from ascendbridge.gatekit.checker import checker_gate
from ascendbridge.memory_plan import MemoryPlan, Room, accuracy_plan
from ascendbridge.package import uv_env
from ascendbridge.package.spec import AdaptationSpec
from ascendbridge.package.weights import weights_available
from ascendbridge.stage_api import FigureSet, GateResult, StageContext, StageOutcome, failed
from ascendbridge.stage_inputs import memory_planned, run_with_inputs, synced_env
from ascendbridge.stage_table import describe
from ascendbridge.workers.host_memory import built_parameters
from optimization.render import render_accuracy_run_perf
from optimization.settings import OptimizationSettings

# The perf run's result fields the notes keep as they are (accuracy_run_perf.py's result line).
PERF_RUN_KEPT = ("metrics", "outputs", "trace", "speedup", "interval")


def _failed(summary: str, rule: str, command: Any = None, result: dict[str, Any] | None = None) -> StageOutcome:
    """The failed outcome; a model run's own one-line error goes into the summary (what the log line
    and the board show first), its output's tail beside it."""
    if command is None:
        return failed(summary, rule)
    error = command.why_failed(result)
    return failed(f"{summary}: {error}", rule, error=error, log_tail=command.tail(30))


def _write_json(path: Path, data: dict[str, Any]) -> None:
    write_text_atomic(path, json.dumps(data, indent=2, sort_keys=True) + "\n")


def _model_files(directory: Path, notes: dict[str, Any]) -> None:
    """Passes that change module code: keep a copy of the swap code next to the model."""
    if notes.get("runtime_only", True):
        return
    target = directory / "model_files"
    target.mkdir(exist_ok=True)
    shutil.copyfile(RUNTIME_DIR / "optimize" / "npu_swaps.py", target / "npu_swaps.py")
    (target / "README.md").write_text(
        "Module swaps applied by accuracy_run_perf.py at load time "
        f"(passes: {', '.join(notes['chosen'])}); source copied from ab_runtime.\n"
    )


def outcome_summary(final: dict[str, Any]) -> str:
    """One line: the confirmed figure (the search's selection figure beside it), settings apart."""
    selection = final.get("selection_speedup")
    searched = f"; the search's own figure was x{selection:.2f}" if selection else ""
    if final["outcome"] != "gain":
        return (
            f"no gain: {final.get('reason', 'nothing faster beyond noise')}"
            if selection
            else "no gain: no pass was faster beyond the measured noise with accuracy intact"
        )
    low, high = final["interval"]
    parts = []
    if final.get("model_changes"):
        parts.append(f"model changes {'+'.join(final['model_changes'])}")
    if final.get("environment_settings"):
        parts.append(
            f"environment settings {'+'.join(final['environment_settings'])} (describe this machine's "
            "load and cores, not the model)"
        )
    return (
        f"{'; '.join(parts)}: confirmed x{final['speedup']:.2f} ({low:.2f}..{high:.2f}) "
        f"{final['baseline_median_ms']:.2f} -> {final['optimized_median_ms']:.2f} ms{searched}, accuracy pass"
    )


def _figures(notes: dict[str, Any], result: dict[str, Any], stack: dict[str, Any]) -> list[FigureSet]:
    """The board's figures of the confirmed choice and its perf run, written by the team lead only
    when the gates pass (StageOutcome.metrics); every figure names the stack it was measured on."""
    final = notes["final"]
    values = {
        "speedup": float(final["speedup"]),
        "perf_speedup": float(result["speedup"]),
        "accuracy_pass": 1.0 if result["verdict"] == "pass" else 0.0,
        "passes_chosen": float(len(notes["chosen"])),
    }
    units = {"speedup": "x", "perf_speedup": "x", "accuracy_pass": "bool", "passes_chosen": "count"}
    for key in ("baseline_median_ms", "optimized_median_ms"):
        if isinstance(final.get(key), (int, float)):
            values[key], units[key] = float(final[key]), "ms"
    return [FigureSet(values, device=result["device"], dtype=result["dtype"], units=units, stack=stack)]


class OptimizationStage:
    name = "optimization"

    def run(self, ctx: StageContext) -> StageOutcome:
        return run_with_inputs(ctx, OptimizationSettings, "optimization_setup", self._run)

    def _run(self, ctx: StageContext, settings: OptimizationSettings, spec: AdaptationSpec) -> StageOutcome:
        pretrained = settings.real_weights and weights_available(spec)[0]

        def plan(parameters: int, room: Room) -> MemoryPlan:  # a baseline and a candidate, paired
            built = built_parameters(parameters, pretrained)
            return accuracy_plan(self.name, built, [spec.dtype.target], room, False, targets=2)

        memory = memory_planned(ctx, settings.device, plan)
        if isinstance(memory, StageOutcome):
            return memory
        profile = uv_env.profile_for_device(settings.device)
        env = synced_env(ctx, spec, profile, settings.real_weights)
        if isinstance(env, StageOutcome):
            return env
        stack, pretrained = env
        ctx.say("searching the pass catalogue")
        argv = [
            "-m",
            "ab_runtime.optimize",
            *settings.common_args(pretrained),
            "--min-gain",
            str(settings.min_gain),
            "--perf-evidence",
        ]
        argv += ["--workload", settings.workload] if settings.workload else []
        if settings.passes:
            argv += ["--passes", settings.passes]
        search = uv_env.run_in_env(ctx.adaptation_dir, argv, timeout_s=settings.timeout_s, log=ctx.log)
        found = uv_env.parse_result(search.output)
        if search.exit_code == EXIT_BAD_INPUT:  # the passes asked for: a setting no retry changes
            return _failed("optimization.passes", "bad_setting", search, found)
        if search.exit_code != 0 or not found or not found.get("ok"):
            return _failed("the pass search failed", "optimization_search_failed", search, found)
        notes_path = ctx.adaptation_dir / NOTES_FILE
        try:
            notes = read_notes(notes_path)
        except EvidenceError as exc:
            return _failed(
                f"the pass search left no readable notes: {exc}", "optimization_search_failed", search, found
            )
        render_accuracy_run_perf(spec, ctx.adaptation_dir, notes["chosen"], notes["device"])
        _model_files(ctx.adaptation_dir, notes)
        result = notes["confirmation"].get("perf_result")
        if result:  # the confirmation's fresh process wrote the perf evidence of the chosen passes
            ctx.say(
                f"chosen: {', '.join(notes['chosen'])}; perf evidence from the confirmation run ({result['metrics']})"
            )
        else:
            ctx.say(f"chosen: {', '.join(notes['chosen']) or 'nothing (no gain)'}; running accuracy_run_perf.py")
            # the perf run times the headline of the workload the search optimized
            perf_argv = [
                "accuracy_run_perf.py",
                *settings.common_args(pretrained),
                "--workload",
                notes["settings"]["workload"],
            ]
            perf = uv_env.run_in_env(ctx.adaptation_dir, perf_argv, timeout_s=settings.timeout_s, log=ctx.log)
            result = uv_env.parse_result(perf.output)
            if perf.exit_code not in (0, 2) or not result or not result.get("ok"):
                return _failed("accuracy_run_perf.py failed", "optimization_perf_failed", perf, result)
        metrics = read_metrics(ctx.adaptation_dir / result["metrics"]).data
        notes["perf_run"] = {
            **{key: result[key] for key in PERF_RUN_KEPT},
            "accuracy": accuracy_summary(metrics["accuracy"]),
            "process": "confirmation" if notes["confirmation"].get("perf_result") else "perf_run",
        }
        _write_json(notes_path, notes)
        final = notes["final"]
        figures = _figures(notes, result, stack)
        if result["verdict"] != "pass":
            return _failed("the optimized run failed accuracy", "optimization_accuracy")
        return StageOutcome(
            "done",
            outcome_summary(final),
            result={
                "chosen": notes["chosen"],
                "outcome": final["outcome"],
                "speedup": final["speedup"],
                "selection_speedup": final.get("selection_speedup"),
                "environment_settings": final.get("environment_settings", []),
                "model_changes": final.get("model_changes", []),
                "perf_run": notes["perf_run"],
                "stack": stack,
                "memory_plan": memory.evidence() if memory else None,
            },
            metrics=figures,
        )

    def gate(self, ctx: StageContext) -> GateResult:
        use_model_env(ctx.model)
        reports = []
        row = describe(self.name)
        for script in row.checkers:  # in stage.toml's order: the notes first
            result = checker_gate(
                row.package / script, ["--adaptation-dir", str(ctx.adaptation_dir)], row.gate_timeout_s
            )
            if "output_tail" in result.report:  # no report at all
                return result
            reports.append(result.report)
            if not result.passed:  # inconclusive (a timing check the host's load left undecided) is kept as such
                return GateResult(
                    False,
                    f"{Path(script).name}: {result.summary}",
                    {"reports": reports},
                    inconclusive=result.inconclusive,
                )
        return GateResult(True, "; ".join(str(r.get("summary", "")) for r in reports), {"reports": reports})


OPTIMIZATION_STAGE = OptimizationStage()
