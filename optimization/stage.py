"""The Optimization stage: search the pass catalogue, render and run accuracy_run_perf.py, record.

run: syncs the device profile's environment, runs the search (`python -m ab_runtime.optimize`)
in the adaptation, which writes optimization_notes.json; renders accuracy_run_perf.py with the
chosen passes (none: "no gain", the run is then the baseline itself), runs it, records the perf
run in the notes and the figures on the board. gate: check_optimization_notes.py and
check_accuracy_run_perf.py as separate processes.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Optional

from adaptation import uv_env
from adaptation.generator import RUNTIME_DIR
from adaptation.healing.steps import weights_available
from adaptation.spec import AdaptationSpec
from adaptation.stack import StackError, env_stack
from ascendbridge.stacks import describe
from ascendbridge.envmode import use_model_env
from ascendbridge.board.store import BoardStore
from ascendbridge.runtime.reports import run_checker
from ascendbridge.stage_api import GateResult, StageContext, StageOutcome
from optimization.gate import accuracy_summary
from optimization.notes_check import NOTES_FILE
from optimization.render import render_accuracy_run_perf

SCRIPTS = Path(__file__).resolve().parent / "scripts"
GATE_TIMEOUT_S = 1200.0


@dataclass(frozen=True)
class OptimizationSettings:
    device: str = "cpu"
    pairs: int = 5
    iters: int = 5
    warmup: int = 2
    num_samples: int = 2
    min_gain: float = 0.02
    passes: str = ""  # comma-separated subset of the catalogue; empty = all for the device
    real_weights: bool = True
    timeout_s: float = 1800.0

    @classmethod
    def from_sources(cls, settings: Optional[Mapping[str, Any]] = None) -> "OptimizationSettings":
        """The context's settings (optimization_* keys), else ASCENDBRIDGE_OPTIMIZATION_* variables."""
        settings = settings or {}

        def pick(key: str, default: Any) -> Any:
            full = key if key == "device" else f"optimization_{key}"
            if settings.get(full) is not None:
                return settings[full]
            env = "ASCENDBRIDGE_DEVICE" if key == "device" else f"ASCENDBRIDGE_OPTIMIZATION_{key.upper()}"
            return os.environ.get(env, default)

        try:
            result = cls(device=str(pick("device", "cpu")), pairs=int(pick("pairs", 5)), iters=int(pick("iters", 5)),
                         warmup=int(pick("warmup", 2)), num_samples=int(pick("num_samples", 2)),
                         min_gain=float(pick("min_gain", 0.02)), passes=str(pick("passes", "")),
                         real_weights=str(pick("real_weights", "1")).lower() not in ("0", "false", "no", "off"),
                         timeout_s=float(pick("timeout_s", 1800.0)))
        except ValueError as exc:
            raise ValueError(f"bad optimization setting: {exc}") from None
        if result.pairs < 5 or result.iters < 1 or result.warmup < 0 or result.num_samples < 1:
            raise ValueError("optimization settings: pairs >= 5, iters >= 1, warmup >= 0, num_samples >= 1 required")
        uv_env.profile_for_device(result.device)
        return result

    def common_args(self, pretrained: bool) -> list[str]:
        return ["--device", self.device, "--pairs", str(self.pairs), "--iters", str(self.iters), "--warmup",
                str(self.warmup), "--num-samples", str(self.num_samples)] + (["--use-pretrained"] if pretrained else [])


def _failed(summary: str, rule: str, command: Any = None, result: Optional[dict[str, Any]] = None) -> StageOutcome:
    diagnosis: dict[str, Any] = {"rule": rule, "summary": summary}
    if command is not None:
        diagnosis["error"] = (result or {}).get("error") or ("timed out" if command.timed_out else f"exit {command.exit_code}")
        diagnosis["log_tail"] = command.tail(30)
    return StageOutcome("failed", summary, diagnosis=diagnosis)


def _write_json(path: Path, data: dict[str, Any]) -> None:
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
    tmp.replace(path)


def _model_files(directory: Path, notes: dict[str, Any]) -> None:
    """Passes that change module code: keep a copy of the swap code next to the model."""
    if notes.get("runtime_only", True):
        return
    target = directory / "model_files"
    target.mkdir(exist_ok=True)
    shutil.copyfile(RUNTIME_DIR / "npu_swaps.py", target / "npu_swaps.py")
    (target / "README.md").write_text("Module swaps applied by accuracy_run_perf.py at load time "
                                      f"(passes: {', '.join(notes['chosen'])}); source copied from ab_runtime.\n")


class OptimizationStage:
    name = "optimization"

    def run(self, ctx: StageContext) -> StageOutcome:
        use_model_env(ctx.model)
        try:
            settings = OptimizationSettings.from_sources(ctx.settings)
            spec = AdaptationSpec.load(ctx.adaptation_dir)
        except ValueError as exc:
            return _failed(str(exc), "optimization_setup")
        profile = uv_env.profile_for_device(settings.device)
        ctx.say(f"syncing the {profile} environment")
        sync = uv_env.sync(ctx.adaptation_dir, profile, log=ctx.log)
        if not sync.ok:
            return _failed(f"uv sync --extra {profile} failed", "sync_failed", sync)
        try:
            stack = env_stack(ctx.adaptation_dir)
        except StackError as exc:
            return _failed(str(exc), "stack_probe_failed")
        ctx.say(f"stack {stack['stack_id']}: {describe(stack['data'])}")
        available, why = weights_available(spec)
        pretrained = settings.real_weights and available
        ctx.say(f"weights: {'real' if pretrained else 'config-initialised'} ({why}); searching the pass catalogue")
        argv = ["-m", "ab_runtime.optimize", *settings.common_args(pretrained), "--min-gain", str(settings.min_gain)]
        if settings.passes:
            argv += ["--passes", settings.passes]
        search = uv_env.run_in_env(ctx.adaptation_dir, argv, timeout_s=settings.timeout_s, log=ctx.log)
        found = uv_env.parse_result(search.output)
        if search.exit_code != 0 or not found or not found.get("ok"):
            return _failed("the pass search failed", "optimization_search_failed", search, found)
        notes_path = ctx.adaptation_dir / NOTES_FILE
        notes = json.loads(notes_path.read_text())
        render_accuracy_run_perf(spec, ctx.adaptation_dir, notes["chosen"], settings.device)
        _model_files(ctx.adaptation_dir, notes)
        ctx.say(f"chosen: {', '.join(notes['chosen']) or 'nothing (no gain)'}; running accuracy_run_perf.py")
        perf = uv_env.run_in_env(ctx.adaptation_dir, ["accuracy_run_perf.py", *settings.common_args(pretrained)],
                                 timeout_s=settings.timeout_s, log=ctx.log)
        result = uv_env.parse_result(perf.output)
        if perf.exit_code not in (0, 2) or not result or not result.get("ok"):
            return _failed("accuracy_run_perf.py failed", "optimization_perf_failed", perf, result)
        metrics = json.loads((ctx.adaptation_dir / result["metrics"]).read_text())
        notes["perf_run"] = {"metrics": result["metrics"], "outputs": result["outputs"], "trace": result["trace"],
                             "speedup": result["speedup"], "interval": result["interval"],
                             "accuracy": accuracy_summary(metrics["accuracy"])}
        _write_json(notes_path, notes)
        final = notes["final"]
        store = BoardStore(ctx.board_path)
        try:
            values = {"speedup": float(final["speedup"]), "perf_speedup": float(result["speedup"]),
                      "accuracy_pass": 1.0 if result["verdict"] == "pass" else 0.0,
                      "passes_chosen": float(len(notes["chosen"]))}
            units = {"speedup": "x", "perf_speedup": "x", "accuracy_pass": "bool", "passes_chosen": "count"}
            for key in ("baseline_median_ms", "optimized_median_ms"):
                if isinstance(final.get(key), (int, float)):
                    values[key], units[key] = float(final[key]), "ms"
            # Stack id: every figure names the stack it was measured on (stacks.stack_id).
            store.add_metrics(ctx.model.model_id, "optimization", values, device=result["device"],
                              dtype=result["dtype"], units=units, stack=stack)
        finally:
            store.close()
        if result["verdict"] != "pass":
            return _failed("the optimized run failed accuracy", "optimization_accuracy")
        if not notes["chosen"]:
            summary = "no gain: no pass was faster beyond the measured noise with accuracy intact"
        else:
            low, high = final["interval"]
            summary = (f"{'+'.join(notes['chosen'])}: x{final['speedup']:.2f} ({low:.2f}..{high:.2f}) "
                       f"{final['baseline_median_ms']:.2f} -> {final['optimized_median_ms']:.2f} ms, accuracy pass")
        return StageOutcome("done", summary, result={"chosen": notes["chosen"], "outcome": final["outcome"],
                                                     "speedup": final["speedup"], "perf_run": notes["perf_run"],
                                                     "stack": stack})

    def gate(self, ctx: StageContext) -> GateResult:
        use_model_env(ctx.model)
        reports = []
        for script in ("check_optimization_notes.py", "check_accuracy_run_perf.py"):
            argv = [sys.executable, str(SCRIPTS / script), "--adaptation-dir", str(ctx.adaptation_dir), "--json"]
            report, res = run_checker(argv, GATE_TIMEOUT_S)
            if report is None:
                return GateResult(False, f"{script} gave no report (exit {res.exit_code}): {res.tail(3)}",
                                  {"output_tail": res.tail(20)})
            reports.append(report)
            if res.exit_code != 0 or report.get("passed") is not True:
                return GateResult(False, f"{script}: {report.get('summary', '')}", {"reports": reports})
        return GateResult(True, "; ".join(str(r.get("summary", "")) for r in reports), {"reports": reports})


OPTIMIZATION_STAGE = OptimizationStage()
