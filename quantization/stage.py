"""The quantization stage: quantize a causal LM with Huawei's msModelSlim and with LLM-Compressor,
and accept each scheme's checkpoint by executing it by reference against the float model.

run: exports the package's model (real weights, or config-initialised from the recipe's seed) in
the tool environment, copies the recorded calibration sample into the package, and for each
scheme of `quantization.schemes` either writes msModelSlim's default practice with that sample as
its dataset and runs `msmodelslim quant` on the CPU (W8A8_DYNAMIC, W8A16: ascendv1 checkpoints),
or runs LLM-Compressor's oneshot with that sample (CT_W8A8: a compressed-tensors checkpoint);
then digests the checkpoint and evaluates it (ab_runtime.quant.evaluate). Every scheme is recorded in the package's quant_evidence.json,
accepted or refused with its figures; the stage completes when that evidence is whole. Other
families are skipped on the first attempt. The checkpoints are not served here.
gate: quantization/scripts/check_quantization.py, a separate process that recomputes the digests,
re-applies the standard and re-runs the evaluation with the framework's runtime copy.
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path
from typing import Any

from ascendbridge.envmode import use_model_env
from ascendbridge.gatekit.checker import package_gate
from ascendbridge.package.spec import AdaptationSpec
from ascendbridge.package.weights import weights_available
from ascendbridge.stage_api import FigureSet, GateResult, StageContext, StageOutcome, failed
from ascendbridge.stage_inputs import run_with_inputs
from quantization.env import CT_TOOL, TOOL, ToolEnvError, ready
from quantization.evidence import board_figures, scheme_record
from quantization.settings import PRACTICES, QuantizationSettings
from quantization.steps import (
    CALIBRATION,
    EVAL_THREADS,
    EVIDENCE_FILE,
    MODEL_DIR,
    SCHEMA,
    WORK_DIR,
    StepError,
    calibration_record,
    compress,
    evaluate,
    export,
    model_digest,
    quantize,
    tool_model_type,
    write_practice,
)

QUANTIZED_FAMILIES = ("causal_lm",)  # msModelSlim's LLM path; ab_runtime.quant's reference is a causal LM


class QuantizationStage:
    name = "quantization"

    def run(self, ctx: StageContext) -> StageOutcome:
        return run_with_inputs(ctx, QuantizationSettings, "quantization_setup", self._run)

    def _run(self, ctx: StageContext, settings: QuantizationSettings, spec: AdaptationSpec) -> StageOutcome:
        if spec.task_family not in QUANTIZED_FAMILIES:
            return StageOutcome(
                "skipped",
                f"quantization covers causal LMs only (msModelSlim's LLM path, the reference forward of "
                f"ab_runtime.quant); a {spec.task_family} model is not quantized",
            )
        try:
            python = ready(settings.python, ctx.log)
        except ToolEnvError as exc:
            return failed(
                str(exc),
                "quantization_env_missing",
                retryable=False,
                remedy="install it once per host: `uv run python -m quantization.env` (docs/quantization.md)",
            )
        directory = ctx.adaptation_dir
        work = directory / WORK_DIR
        shutil.rmtree(work, ignore_errors=True)  # a previous run's checkpoints are never checked next to this
        work.mkdir()
        try:
            pretrained = settings.real_weights and weights_available(spec)[0]
            ctx.say(f"exporting the {'real' if pretrained else 'config-initialised'} weights with {python}")
            exported = export(python, directory, pretrained, settings.export_timeout_s, ctx.log)
            config = json.loads((directory / MODEL_DIR / "config.json").read_text())
            calibration = work / CALIBRATION.name
            shutil.copyfile(CALIBRATION, calibration)
            schemes = {}
            for scheme in settings.scheme_list():
                schemes[scheme] = self._scheme(ctx, settings, python, directory, scheme, calibration, config)
        except StepError as exc:
            return failed(str(exc), exc.rule)
        evidence: dict[str, Any] = {
            "schema": SCHEMA,
            "model_id": spec.model.model_id,
            "model": {
                "dir": MODEL_DIR,
                "mode": exported.get("mode"),
                "model_type": config.get("model_type"),
                "tool_model_type": tool_model_type(config),
                "digest": model_digest(directory / MODEL_DIR),
            },
            "calibration": {"path": f"{WORK_DIR}/{CALIBRATION.name}", **calibration_record(calibration)},
            "eval_threads": EVAL_THREADS,
            "schemes": schemes,
            "usable": [s for s, r in schemes.items() if r["verdict"] == "accepted"],
            "served": False,  # the checkpoints are not served by this stage (docs/quantization.md)
        }
        (directory / EVIDENCE_FILE).write_text(json.dumps(evidence, indent=1) + "\n")
        values, units = board_figures(schemes)
        metrics = [FigureSet(values, device="cpu", dtype="int8", units=units)]
        summary = "; ".join(_scheme_line(s, r) for s, r in schemes.items())
        result = {"evidence": EVIDENCE_FILE, "usable": evidence["usable"]}
        return StageOutcome("done", summary, result=result, metrics=metrics)

    @staticmethod
    def _scheme(
        ctx: StageContext,
        settings: QuantizationSettings,
        python: Path,
        directory: Path,
        scheme: str,
        calibration: Path,
        config: dict[str, Any],
    ) -> dict[str, Any]:
        """One scheme quantized, digested and evaluated: its evidence record."""
        work = directory / WORK_DIR
        checkpoint = work / scheme
        started = time.monotonic()
        if scheme in PRACTICES:
            practice_file = work / f"practice-{scheme}.yaml"
            practice = write_practice(python, PRACTICES[scheme], practice_file, calibration)
            ctx.say(f"{scheme}: msmodelslim quant with practice {practice['id']} (CPU)")
            started = time.monotonic()
            model_type = tool_model_type(config)
            argv = quantize(
                python, directory / MODEL_DIR, checkpoint, practice_file, model_type, settings.tool_timeout_s, ctx.log
            )
            tool = {"name": TOOL, "version": practice["tool_version"]}
            recipe = {"id": practice["id"], "source": practice["source"], "file": practice_file.name}
        else:
            ctx.say(f"{scheme}: llmcompressor oneshot W8A8 with the calibration sample (CPU)")
            argv, made = compress(
                python, directory / MODEL_DIR, checkpoint, calibration, settings.tool_timeout_s, ctx.log
            )
            tool = {
                "name": CT_TOOL,
                "version": made["tool_version"],
                "compressed_tensors": made["compressed_tensors_version"],
            }
            recipe = {"id": "llmcompressor-w8a8", "source": made["recipe"], "file": f"{scheme}/recipe.yaml"}
        quantize_s = time.monotonic() - started
        ctx.say(f"{scheme}: evaluating the checkpoint by reference")
        code, report, tail = evaluate(python, directory / MODEL_DIR, checkpoint, settings.eval_timeout_s, directory)
        return scheme_record(
            directory,
            scheme,
            tool=tool,
            practice=recipe,
            argv=argv,
            quantize_s=quantize_s,
            evaluation=(code, report, tail),
        )

    def gate(self, ctx: StageContext) -> GateResult:
        use_model_env(ctx.model)
        return package_gate(self.name, ctx.adaptation_dir)


def _scheme_line(scheme: str, record: dict[str, Any]) -> str:
    figures = record.get("figures") or {}
    if not figures:
        return f"{scheme} refused: {record['reason']}"
    return (
        f"{scheme} {record['verdict']}: cosine min {figures['cosine_min']:.5f}, top-1 "
        f"{figures['top1_agreement']:.3f}, weights {record['size_ratio']:.2f}x"
    )


QUANTIZATION_STAGE = QuantizationStage()
