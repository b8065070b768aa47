"""The Adaptation stage: build the spec from the board record, render the package, `uv lock`.

Its gate is `adaptation/scripts/check_adaptation.py --no-run` (the checks are adaptation/gate.py) run as
a separate process: files, spec, runtime copy, demo wrapper, pyproject extras/conflicts and `uv lock --check`. Running the demo
is the Healing stage's job (its gate runs the full check), because a demo that fails here is
exactly what the healer exists to fix; failing Adaptation for it would stop the pipeline before
the healer could try.
"""

from __future__ import annotations

from adaptation.spec_builder import AdaptationRefused, ask_llm_adapter, build_spec
from ascendbridge.gatekit.checker import checker_gate
from ascendbridge.package.generator import GeneratorError, generate
from ascendbridge.package.spec import SPEC_FILE, AdaptationSpec
from ascendbridge.stage_api import GateResult, StageContext, StageOutcome
from ascendbridge.stage_table import describe


def _healed_spec(ctx: StageContext) -> AdaptationSpec | None:
    """A spec the healer already fixed for this model: re-adapting must not throw the fixes away."""
    if not (ctx.adaptation_dir / SPEC_FILE).is_file():
        return None
    try:
        spec = AdaptationSpec.load(ctx.adaptation_dir)
    except ValueError:
        return None  # corrupt: rebuilt from the board below
    if spec.model.model_id == ctx.model.model_id and spec.applied_fixes:
        return spec
    return None


class AdaptationStage:
    name = "adaptation"

    def run(self, ctx: StageContext) -> StageOutcome:
        spec = _healed_spec(ctx)
        if spec is not None:
            ctx.say(f"keeping the healed spec ({len(spec.applied_fixes)} applied fixes)")
        else:
            try:
                spec = build_spec(ctx.model)
            except AdaptationRefused as refusal:
                spec = ask_llm_adapter(ctx.model, refusal)
                if spec is None:
                    blocked = refusal.diagnosis["rule"] == "remote_code_not_allowed"
                    return StageOutcome("blocked" if blocked else "failed", str(refusal), diagnosis=refusal.diagnosis)
        ctx.say(
            f"spec: {spec.task_family} via {spec.model_class}"
            + (f", dry runs build at most {spec.dry_run_max_layers} layers" if spec.dry_run_max_layers else "")
        )
        ctx.say(f"rendering {ctx.adaptation_dir}")
        try:
            generation = generate(spec, ctx.adaptation_dir, log=ctx.log)
        except (GeneratorError, ValueError, OSError) as exc:
            return StageOutcome(
                "failed", f"rendering failed: {exc}", diagnosis={"rule": "render_failed", "summary": str(exc)}
            )
        if not generation.ok:
            assert generation.lock is not None
            tail = generation.lock.tail(15)
            return StageOutcome(
                "failed",
                "uv lock failed",
                diagnosis={
                    "rule": "lock_failed",
                    "summary": "uv lock could not resolve the adaptation's dependencies",
                    "log_tail": tail,
                },
            )
        changed = [str(p.relative_to(ctx.adaptation_dir)) for p in generation.changed]
        ctx.say(
            f"{len(changed)} files written"
            + (f", uv lock took {generation.lock.duration_s:.1f} s" if generation.lock else ", lock unchanged")
        )
        return StageOutcome(
            "done",
            f"rendered {spec.name} ({spec.task_family}, {spec.model_class})",
            result={
                "adaptation_dir": str(ctx.adaptation_dir),
                "task_family": spec.task_family,
                "model_class": spec.model_class,
                "dry_run_max_layers": spec.dry_run_max_layers,
                "files_changed": changed,
                "lock_s": round(generation.lock.duration_s, 2) if generation.lock else None,
            },
        )

    def gate(self, ctx: StageContext) -> GateResult:
        row = describe(self.name)  # its checker and limit, as stage.toml declares them
        return checker_gate(
            row.package / row.checkers[0],
            ["--adapt", ctx.model.adaptation_name, "--adaptations-dir", str(ctx.adaptation_dir.parent), "--no-run"],
            row.gate_timeout_s,
        )


ADAPTATION_STAGE = AdaptationStage()
