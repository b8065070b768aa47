"""What a stage's run reads first, the same way in every stage: the model's environment mode, the
stage's settings section and the adaptation spec. A bad setting is the refusal every stage gives
(`SettingsError.diagnosis`); a missing package is the refusal `missing_adaptation`, a package whose
runtime is not this framework's the refusal `outdated_runtime` (every gate would fail it after the
run); an unreadable spec fails with the stage's own rule."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

from ascendbridge.discovery.config_estimate import proxy_parameters
from ascendbridge.envmode import use_model_env
from ascendbridge.gatekit.integrity import runtime_problems
from ascendbridge.memory_plan import MemoryPlan, Room
from ascendbridge.package import uv_env
from ascendbridge.package.spec import AdaptationSpec, MissingSpecError
from ascendbridge.package.stack import StackError, env_stack
from ascendbridge.package.weights import weights_available
from ascendbridge.settings import S, SettingsError
from ascendbridge.stack_identity import describe
from ascendbridge.stage_api import StageContext, StageOutcome, failed
from ascendbridge.workers.host_memory import room


def run_with_inputs(
    ctx: StageContext,
    settings_class: type[S],
    rule: str,
    run: Callable[[StageContext, S, AdaptationSpec], StageOutcome],
) -> StageOutcome:
    """`run(ctx, settings, spec)`, or, when they cannot be read, the failed outcome."""
    use_model_env(ctx.model)  # a `system` model syncs its system venv, never `uv sync --locked`
    try:
        settings = settings_class.from_sources(ctx.settings)
        spec = AdaptationSpec.load(ctx.adaptation_dir)
    except SettingsError as exc:
        return StageOutcome("failed", str(exc), diagnosis=exc.diagnosis())
    except MissingSpecError as exc:
        return failed(f"{exc}: the model's package is not in this adaptations folder", "missing_adaptation")
    except ValueError as exc:
        return failed(str(exc), rule)
    stale = runtime_problems(ctx.adaptation_dir)
    if stale:  # an AscendBridge update since the package was rendered (or an edit): no run can pass its gate
        return failed(f"the package's runtime is not this framework's: {stale[0]}", "outdated_runtime")
    return run(ctx, settings, spec)


class ModelEnv(NamedTuple):
    """The synced environment a stage measures in: its stack (every figure names it) and whether
    the run loads the real weights."""

    stack: dict[str, Any]
    pretrained: bool


def synced_env(
    ctx: StageContext, spec: AdaptationSpec, profile: str, real_weights: bool, timeout_s: float = uv_env.SYNC_TIMEOUT_S
) -> ModelEnv | StageOutcome:
    """Sync the adaptation's `profile` environment, probe its stack and choose real or
    config-initialised weights, saying each; or the failed outcome (`sync_failed`, `stack_probe_failed`)."""
    ctx.say(f"syncing the {profile} environment")
    sync = uv_env.sync(ctx.adaptation_dir, profile, timeout_s=timeout_s, log=ctx.log)
    if not sync.ok:
        return failed(f"uv sync --extra {profile} failed", "sync_failed", log_tail=sync.tail(20))
    try:
        stack = env_stack(ctx.adaptation_dir)
    except StackError as exc:
        return failed(str(exc), "stack_probe_failed")
    ctx.say(f"stack {stack['stack_id']}: {describe(stack['data'])}")
    available, why = weights_available(spec)
    pretrained = real_weights and available
    ctx.say(f"weights: {'real' if pretrained else 'config-initialised'} ({why})")
    return ModelEnv(stack, pretrained)


def memory_planned(
    ctx: StageContext, device: str, plan: Callable[[int, Room], MemoryPlan]
) -> MemoryPlan | StageOutcome | None:
    """The stage's memory plan from discovery's parameter count and this host's room, said in its
    log before anything is loaded; the refusal (figures and remedy, not retried) when nothing fits;
    None, said, when the model's size or the host's memory is unknown (the run goes on unplanned)."""
    parameters, where = ctx.model.parameter_count, room(device)
    if not parameters or where is None:
        unknown = "discovery recorded no parameter count" if not parameters else "the host's memory is unknown"
        ctx.say(f"memory plan: not computed ({unknown})")
        return None
    if ctx.model.proxy_depth:  # the run builds the registered proxy, not the full model
        parameters = proxy_parameters(parameters, ctx.model.metadata.get("config") or {}, ctx.model.proxy_depth)
        ctx.say(f"memory plan for the {ctx.model.proxy_label()}: about {parameters:,} parameters")
    chosen = plan(parameters, where)
    ctx.say(chosen.line())
    if not chosen.fits:
        diagnosis = chosen.diagnosis()
        return StageOutcome("failed", str(diagnosis["summary"]), diagnosis=diagnosis)
    return chosen
