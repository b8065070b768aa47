"""The business_benchmark stage: task quality on the bundled sets, target device vs CPU fp32.

run: chooses the model's evaluations (business_benchmark.mapping, board override honoured),
renders business_run.py and copies the sets into the adaptation, syncs the device profile's
environment, runs business_run.py there (predictions of the reference and the target on the same
items), derives metrics and the pass rule's verdict with framework code (business_metrics_*.json)
and proposes the figures (the team lead writes them with the gated completion).
gate: business_benchmark/scripts/check_business_benchmark.py, a separate process that recomputes
everything and re-runs a sample.
"""

from __future__ import annotations

import json
from typing import Any

from ascendbridge.envmode import use_model_env
from ascendbridge.gatekit.checker import package_gate
from ascendbridge.package import uv_env
from ascendbridge.package.spec import AdaptationSpec
from ascendbridge.package.weights import weights_available
from ascendbridge.stage_api import FigureSet, GateResult, StageContext, StageOutcome, failed
from ascendbridge.stage_inputs import run_with_inputs
from business_benchmark.datasets import DatasetError
from business_benchmark.evidence import PREDICTIONS_PREFIX, board_values, build_evidence, read_json, stem
from business_benchmark.lm_eval_path import LOCAL_SET, lm_eval_argv, prepare_lm_eval
from business_benchmark.mapping import evaluations_for_model
from business_benchmark.render import BUSINESS_RUN, copy_sets, render_business_run
from business_benchmark.settings import BusinessSettings


def business_figures(evidence: dict[str, Any]) -> list[FigureSet]:
    """The business figures the team lead writes with the gated completion (stage business_benchmark)."""
    values, units = board_values(evidence)
    return [FigureSet(values, device=evidence["run"]["device"], dtype=evidence["run"]["dtype"], units=units)]


class BusinessBenchmarkStage:
    name = "business_benchmark"

    def run(self, ctx: StageContext) -> StageOutcome:
        return run_with_inputs(ctx, BusinessSettings, "business_setup", self._run)

    def _run(self, ctx: StageContext, settings: BusinessSettings, spec: AdaptationSpec) -> StageOutcome:
        try:
            evaluations, notes = evaluations_for_model(ctx.model, json.loads(spec.to_json()))
            render_business_run(spec.model.model_id, spec.task_family, ctx.adaptation_dir)
            copy_sets(
                [e.set for e in evaluations] + ([LOCAL_SET] if settings.lm_eval_tasks else []), ctx.adaptation_dir
            )
        except (ValueError, DatasetError, OSError) as exc:
            return failed(str(exc), "business_setup")
        dtype = settings.dtype_for(spec.dtype.target)
        for old in [
            *ctx.adaptation_dir.glob("business_metrics_*.json"),
            *ctx.adaptation_dir.glob(f"{PREDICTIONS_PREFIX}*.json"),
        ]:
            old.unlink()  # a previous run's evidence is replaced, never checked next to the new one
        ctx.say(
            f"{BUSINESS_RUN} rendered; evaluations {', '.join(f'{e.set}:{e.task}' for e in evaluations)}; "
            f"syncing the {settings.profile} environment"
        )
        sync = uv_env.sync(ctx.adaptation_dir, settings.profile, timeout_s=settings.sync_timeout_s, log=ctx.log)
        if not sync.ok:
            return failed(f"uv sync --extra {settings.profile} failed", "sync_failed", log_tail=sync.tail(20))
        available, why = weights_available(spec)
        pretrained = settings.real_weights and available
        mode = "pretrained" if pretrained else "dry_run"
        ctx.say(
            f"weights: {'real (task scores and agreement)' if pretrained else 'config-initialised (agreement only)'}"
            f" ({why})"
        )
        predictions = ctx.adaptation_dir / f"{PREDICTIONS_PREFIX}{stem(settings.device, dtype, mode)}.json"
        argv = [
            BUSINESS_RUN,
            "--device",
            settings.device,
            "--dtype",
            dtype,
            "--out",
            predictions.name,
            *(f"--eval={e.set}:{e.task}" for e in evaluations),
        ]
        argv += (
            (["--use-pretrained"] if pretrained else [])
            + (["--max-items", str(settings.max_items)] if settings.max_items else [])
            + (["--threads", str(settings.threads)] if settings.threads else [])
        )
        if settings.lm_eval_tasks:
            problem = prepare_lm_eval(ctx.adaptation_dir, ctx.log)
            if problem:
                return failed(problem, "lm_eval_install_failed")
            argv += lm_eval_argv(settings, ctx.adaptation_dir)
        command = uv_env.run_in_env(ctx.adaptation_dir, argv, timeout_s=settings.run_timeout_s, log=ctx.log)
        result = uv_env.parse_result(command.output)
        if command.exit_code != 0 or not result or not result.get("ok"):
            error = command.why_failed(result)
            return failed(f"{BUSINESS_RUN} failed: {error}", "business_run_failed", log_tail=command.tail(30))
        try:
            evidence = read_json(build_evidence(predictions, settings.rule, notes))
        except (DatasetError, ValueError) as exc:
            return failed(f"business metrics could not be derived: {exc}", "business_metrics_failed")
        figures = business_figures(evidence)
        summary = f"{evidence['run']['device']} {dtype} vs cpu float32 ({evidence['scores']}): " + "; ".join(
            f"{ev['set']} {ev['verdict']}" for ev in evidence["evaluations"]
        )
        outcome_result = {
            "verdict": evidence["verdict"],
            "weights": evidence["weights"],
            "metrics_file": predictions.name.replace(PREDICTIONS_PREFIX, "business_metrics_", 1),
        }
        if evidence["verdict"] != "pass":
            failing = [
                f"{ev['set']} {c['metric']}" for ev in evidence["evaluations"] for c in ev["checks"] if not c["passed"]
            ]
            return StageOutcome(
                "failed",
                f"pass rule failed: {', '.join(failing[:4])}",
                result=outcome_result,
                diagnosis={"rule": "business_pass_rule_failed", "summary": summary, "failing_checks": failing},
                metrics=figures,
            )
        return StageOutcome("done", summary, result=outcome_result, metrics=figures)

    def gate(self, ctx: StageContext) -> GateResult:
        use_model_env(ctx.model)
        return package_gate(self.name, ctx.adaptation_dir)


BUSINESS_BENCHMARK_STAGE = BusinessBenchmarkStage()
