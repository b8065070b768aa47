"""Load the model the spec names: from its config (dry run) or with its real weights.

Dry run: only the config is fetched (local dir, HF cache, or the hub's config.json), weights are
initialised from a fixed seed, and depth is reduced when the parameters would not fit the dry-run
budget (ASCENDBRIDGE_DRY_RUN_MAX_GB, default 2) or spec.dry_run_max_layers. Pretrained: the
weights come through transformers' own from_pretrained, which honours HF_HUB_OFFLINE and HF_TOKEN
from the environment (the token is never read or printed here).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from .depth import DepthPlan, find_stacks, plan_depth, proxy_config
from .device import DeviceChoice, device_total_memory
from .errors import DryRunTooLarge, SpecError, UnsupportedModel
from .fastinit import fast_random_init
from .memory import dry_run_budget, host_available_memory
from .phases import phase
from .progress import Progress
from .sharding import build_device_map, empty_weights, place, plan_for
from .spec import RunSpec, proxy_label
from .ssm import kernel_notes

# A dry run may exceed its budget at minimal depth, but never this share of the device's memory.
HARD_MEMORY_SHARE = 0.8
GiB = 1024**3
# Above this many parameter bytes a dry run initialises with fast_random_init (tiled seeded fill).
FAST_INIT_BYTES = 256 * 1024**2


# The LoadedModel fields a run's result records (LoadedModel.evidence).
LOAD_EVIDENCE = ("mode", "layers_built", "layers_total", "depth_reduced", "param_bytes", "sharding", "proxy")


@dataclass
class LoadedModel:
    model: torch.nn.Module
    config: Any
    mode: str  # dry_run | pretrained
    origin: str  # where config/weights came from, for the progress lines
    dtype: torch.dtype
    layers_total: int | None = None
    layers_built: int | None = None
    depth_reduced: bool = False
    param_bytes: int | None = None
    budget_bytes: int | None = None
    stacks: dict[str, list[int]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    sharding: dict[str, Any] | None = None  # ShardPlan.evidence(map) when spread over several cards
    # A registered reduced-depth proxy (depth.proxy_config's evidence: layers, of, stacks); None: full depth.
    proxy: dict[str, Any] | None = None

    def evidence(self) -> dict[str, Any]:
        """What a run's result records of the load, so a gate can tell a dry run or a reduced depth."""
        return {name: getattr(self, name) for name in LOAD_EVIDENCE}


def resolve_dtype(name: str) -> torch.dtype:
    value = getattr(torch, str(name), None)
    if not isinstance(value, torch.dtype) or not value.is_floating_point:
        raise SpecError(f"unknown floating dtype '{name}' (e.g. float32, bfloat16, float16)")
    return value


def model_class(spec: RunSpec) -> Any:
    import transformers

    cls = getattr(transformers, spec.model_class, None)
    if cls is None or not hasattr(cls, "from_pretrained"):
        raise UnsupportedModel(f"transformers {transformers.__version__} has no model class '{spec.model_class}'")
    return cls


def dtype_kwarg(dtype: torch.dtype) -> dict[str, Any]:
    """transformers renamed torch_dtype= to dtype= in 4.56; support both sides of the rename."""
    import transformers

    major, minor = (int(p) for p in transformers.__version__.split(".")[:2])
    return {"dtype": dtype} if (major, minor) >= (4, 56) else {"torch_dtype": dtype}


def source_kwargs(spec: RunSpec) -> tuple[str, dict[str, Any], str]:
    """(identifier for from_pretrained, kwargs, human description of the source)."""
    kwargs: dict[str, Any] = {"trust_remote_code": spec.trust_remote_code}
    if spec.revision:
        kwargs["revision"] = spec.revision
    if spec.source == "local" or (spec.path and (Path(spec.path) / "config.json").is_file()):
        if not spec.path or not (Path(spec.path) / "config.json").is_file():
            raise SpecError(f"local model directory {spec.path} has no config.json")
        kwargs.pop("revision", None)
        return spec.path, kwargs, f"local directory {spec.path}"
    if spec.source == "hf-cache":
        kwargs.update(cache_dir=spec.path, local_files_only=True)
        return spec.model_id, kwargs, f"HF cache {spec.path or '(default)'} (offline)"
    offline = os.environ.get("HF_HUB_OFFLINE", "") not in ("", "0", "false", "False")
    return spec.model_id, kwargs, "Hugging Face Hub" + (" (HF_HUB_OFFLINE: cache only)" if offline else "")


def _set_override(config: Any, dotted: str, value: Any) -> None:
    *parents, leaf = dotted.split(".")
    target = config
    for name in parents:
        target = getattr(target, name, None)
        if target is None:
            raise SpecError(f"config override '{dotted}': the config has no '{name}'")
    setattr(target, leaf, value)


def load_config(spec: RunSpec) -> tuple[Any, str]:
    """The model's config with spec.config_overrides applied, and where it came from."""
    from transformers import AutoConfig

    ident, kwargs, origin = source_kwargs(spec)
    config = AutoConfig.from_pretrained(ident, **kwargs)
    for key, value in sorted(spec.config_overrides.items()):
        _set_override(config, key, value)
    if getattr(config, "architectures", None) is None:
        # Auto classes iterate config.architectures to choose among several heads; a config saved
        # without it (None) would crash there instead of taking the default head.
        config.architectures = []
    return config, origin


def _builder(cls: Any, spec: RunSpec, dtype: torch.dtype) -> Callable[[Any], torch.nn.Module]:
    """Config -> model through the spec's class: an Auto class or a concrete model class."""
    kwargs = dtype_kwarg(dtype)
    if cls.__name__.startswith("Auto"):
        return lambda config: cls.from_config(config, trust_remote_code=spec.trust_remote_code, **kwargs)
    return lambda config: cls._from_config(config, **kwargs)


def _check_fits(plan: DepthPlan, device: DeviceChoice) -> None:
    """The model is built in host memory, then moved: both must hold it."""
    limits = {"host": host_available_memory(), device.kind: device_total_memory(device)}
    for where, limit in limits.items():
        if plan.param_bytes is not None and limit is not None and plan.param_bytes > HARD_MEMORY_SHARE * limit:
            raise DryRunTooLarge(
                f"dry run needs {plan.param_bytes / GiB:.1f} GiB of parameters even at "
                f"{plan.layers_built or 'full'} layer(s); {where} has {limit / GiB:.1f} GiB available"
            )


def load_model(spec: RunSpec, dry_run: bool, device: DeviceChoice, dtype: torch.dtype) -> LoadedModel:
    """Build or load the model in eval mode on the device, in the requested dtype (the time is the
    run's `model_load` phase)."""
    what = f"{'building' if dry_run else 'loading'} the model ({str(dtype).replace('torch.', '')}, {device.kind})"
    with phase("model_load"), Progress(what):
        return _load_model(spec, dry_run, device, dtype)


def _load_model(spec: RunSpec, dry_run: bool, device: DeviceChoice, dtype: torch.dtype) -> LoadedModel:
    if spec.set_default_device:
        # Model code that creates tensors without a device (masks, position ids) then lands on
        # the run device too; set for the whole process, as the forward pass needs it as well.
        torch.set_default_device(device.torch_device)
    cls = model_class(spec)
    config, origin = load_config(spec)
    build = _builder(cls, spec, dtype)
    notes: list[str] = []
    proxy: dict[str, Any] | None = None
    if spec.proxy_depth:  # every stage builds the registered proxy, weights or not: the depth is cut first
        config, proxy = proxy_config(config, spec.proxy_depth)
        proxy["of"] = spec.proxy_of or proxy["of"]  # the model's layer count as discovery counted it
        notes.append(f"{proxy_label(spec.proxy_depth, proxy['of'])} (a registered reduced-depth proxy)")
    shard = plan_for(spec.device_plan, device)  # None: one device or CPU, loaded as a whole
    device_map: dict[str, str] | None = None
    if not dry_run and not spec.has_weights:
        notes.append("the model has no weights: initialised from its config")
        dry_run = True
    if dry_run:
        budget = dry_run_budget()
        plan = plan_depth(config, build, dtype, budget, spec.dry_run_max_layers)
        if plan.sized_by != "meta":
            notes.append(f"size from a {plan.sized_by}")
        if plan.over_budget and plan.param_bytes is not None:
            notes.append(
                f"minimal depth needs {plan.param_bytes / GiB:.2f} GiB, above the {budget / GiB:.2f} GiB dry-run budget"
            )
        _check_fits(plan, device)
        torch.manual_seed(spec.recipe.seed)
        if plan.param_bytes and plan.param_bytes > FAST_INIT_BYTES:
            notes.append("large tensors initialised by tiling a seeded random block (fast init)")
            with fast_random_init(), torch.no_grad():
                model = build(plan.config)
        else:
            model = build(plan.config)
        loaded = LoadedModel(
            model,
            plan.config,
            "dry_run",
            f"config from {origin}",
            dtype,
            plan.layers_total,
            plan.layers_built,
            plan.depth_reduced,
            plan.param_bytes,
            budget,
            plan.stacks,
            notes,
        )
    else:
        ident, kwargs, _ = source_kwargs(spec)
        if shard is not None:  # real weights go straight onto the claimed cards, never whole onto one
            with empty_weights():
                skeleton = build(config)
            device_map = build_device_map(skeleton, shard, dtype)
            del skeleton
            kwargs["device_map"] = device_map
        model = cls.from_pretrained(ident, config=config, **kwargs, **dtype_kwarg(dtype))
        layers = sum(s.total for s in find_stacks(config)) or None
        loaded = LoadedModel(model, config, "pretrained", f"weights from {origin}", dtype, layers, layers, notes=notes)
        loaded.param_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
    loaded.proxy = proxy
    loaded.notes.extend(kernel_notes(config))
    if device_map is None:  # not already on its cards through from_pretrained(device_map=...)
        loaded.model, device_map = place(loaded.model, device, shard, dtype)
    else:
        loaded.model = loaded.model.eval()
    if shard is not None and device_map is not None:
        loaded.sharding = shard.evidence(device_map)
        loaded.notes.append(f"sharded over {', '.join(shard.devices)} (device_map; inputs on {shard.first_device})")
    return loaded
