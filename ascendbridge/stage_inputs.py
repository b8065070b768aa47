"""What a stage's run reads first, the same way in every stage: the model's environment mode, the
stage's settings section and the adaptation spec. A bad setting is the refusal every stage gives
(`SettingsError.diagnosis`); an unreadable spec fails with the stage's own rule."""

from __future__ import annotations

from collections.abc import Callable

from ascendbridge.envmode import use_model_env
from ascendbridge.package.spec import AdaptationSpec
from ascendbridge.settings import S, SettingsError
from ascendbridge.stage_api import StageContext, StageOutcome


def run_with_inputs(ctx: StageContext, settings_class: type[S], rule: str,
                    run: Callable[[StageContext, S, AdaptationSpec], StageOutcome]) -> StageOutcome:
    """`run(ctx, settings, spec)`, or, when they cannot be read, the failed outcome."""
    use_model_env(ctx.model)  # a `system` model syncs its system venv, never `uv sync --locked`
    try:
        settings = settings_class.from_sources(ctx.settings)
        spec = AdaptationSpec.load(ctx.adaptation_dir)
    except SettingsError as exc:
        return StageOutcome("failed", str(exc), diagnosis=exc.diagnosis())
    except ValueError as exc:
        return StageOutcome("failed", str(exc), diagnosis={"rule": rule, "summary": str(exc)})
    return run(ctx, settings, spec)
