"""Read adaptation.json as plain JSON (no pydantic inside adaptation environments).

Only the fields the runtime needs are read. The input recipe's defaults are defined here, once:
ascendbridge/package/spec.py takes them from this dataclass, so a spec written by the framework and
a hand-edited minimal one behave the same.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from .errors import SpecError

# The files a model directory ships its tokenizer in: discovery reports them, and the runtime takes a
# local directory without any of them as a model without a tokenizer (transformers 5 would invent one).
TOKENIZER_FILES = frozenset(
    {
        "tokenizer.json",
        "tokenizer_config.json",
        "vocab.txt",
        "vocab.json",
        "merges.txt",
        "spiece.model",
        "tokenizer.model",
        "sentencepiece.bpe.model",
        "source.spm",
        "target.spm",
    }
)


@dataclass(frozen=True)
class InputRecipe:
    batch_size: int = 2
    seq_len: int = 32
    decoder_seq_len: int = 8
    image_size: int | None = None
    num_mel_bins: int | None = None
    audio_frames: int | None = None
    seed: int = 1234


@dataclass(frozen=True)
class RunSpec:
    name: str
    model_id: str
    source: str  # huggingface | local | hf-cache
    path: str | None
    revision: str | None
    has_weights: bool
    task_family: str
    model_class: str
    trust_remote_code: bool = False
    recipe: InputRecipe = field(default_factory=InputRecipe)
    dtype_target: str = "float32"
    dtype_fallback: str | None = None
    keep_fp32_modules: tuple[str, ...] = ()  # module classes run in float32 inside low-precision runs
    dry_run_max_layers: int | None = None
    config_overrides: dict[str, Any] = field(default_factory=dict)
    sentence_transformers_pooling: str | None = None
    sentence_transformers_normalize: bool = False  # modules.json's Normalize: L2-normalised embeddings
    set_default_device: bool = False  # healer fix for "tensors on different devices"
    workload: dict[str, Any] = field(default_factory=dict)  # name + sizes (ab_runtime.workloads.resolve)
    device_plan: dict[str, Any] | None = None  # discovery's size plan; N > 1 devices: ab_runtime.sharding
    proxy_depth: int | None = None  # a reduced-depth proxy: layers per stack every run builds (None: full)
    proxy_of: int | None = None  # the model's own layer count, for the label


def proxy_label(layers: int, of: int | None) -> str:
    """How every figure of a reduced-depth proxy is labelled: `proxy: 1 of 28 layers`."""
    return f"proxy: {layers} of {of} layers" if of else f"proxy: {layers} layer{'' if layers == 1 else 's'}"


def _proxy(model: dict[str, Any]) -> tuple[int | None, int | None]:
    proxy = model.get("proxy")
    if proxy is None:
        return None, None
    layers = proxy.get("layers") if isinstance(proxy, dict) else None
    of = proxy.get("of") if isinstance(proxy, dict) else None
    if not _positive(layers) or not (of is None or _positive(of)):
        raise SpecError('spec field \'model.proxy\' must be {"layers": N, "of": M} with positive integers')
    return layers, of


def _positive(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


def _section(data: dict[str, Any], key: str) -> dict[str, Any]:
    value = data.get(key) or {}
    if not isinstance(value, dict):
        raise SpecError(f"spec field '{key}' must be an object")
    return value


def _names(value: Any, key: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise SpecError(f"spec field '{key}' must be a list of class names")
    return tuple(value)


def parse_spec(data: Any) -> RunSpec:
    """Validate the fields the runtime uses; raise SpecError naming the first bad one."""
    if not isinstance(data, dict):
        raise SpecError("spec must be a JSON object")
    model = _section(data, "model")
    for owner, key in ((data, "task_family"), (data, "model_class"), (model, "model_id")):
        if not isinstance(owner.get(key), str) or not owner.get(key):
            raise SpecError(f"spec field '{key}' is missing or not a string")
    source = model.get("source", "huggingface")
    if source not in ("huggingface", "local", "hf-cache"):
        raise SpecError(f"spec field 'model.source' is '{source}', expected huggingface|local|hf-cache")
    if source == "local" and not model.get("path"):
        raise SpecError("spec field 'model.path' is required when model.source is 'local'")
    inputs = _section(data, "inputs")
    dtype = _section(data, "dtype")
    max_layers = data.get("dry_run_max_layers")
    if max_layers is not None and (not isinstance(max_layers, int) or max_layers < 1):
        raise SpecError("spec field 'dry_run_max_layers' must be a positive integer or null")
    try:
        recipe = InputRecipe(**{k: inputs[k] for k in InputRecipe.__dataclass_fields__ if k in inputs})
    except TypeError as exc:
        raise SpecError(f"spec field 'inputs' is invalid: {exc}") from None
    for key in ("batch_size", "seq_len", "decoder_seq_len"):
        if not isinstance(getattr(recipe, key), int) or getattr(recipe, key) < 1:
            raise SpecError(f"spec field 'inputs.{key}' must be a positive integer")
    workload = _section(data, "workload")
    device_plan = data.get("device_plan")
    if device_plan is not None and not isinstance(device_plan, dict):
        raise SpecError("spec field 'device_plan' must be an object or null")
    proxy_depth, proxy_of = _proxy(model)
    overrides = data.get("config_overrides") or {}
    if not isinstance(overrides, dict):
        raise SpecError("spec field 'config_overrides' must be an object")
    return RunSpec(
        name=str(data.get("name") or model["model_id"]),
        model_id=model["model_id"],
        source=source,
        path=model.get("path"),
        revision=model.get("revision"),
        has_weights=bool(model.get("has_weights", True)),
        task_family=data["task_family"],
        model_class=data["model_class"],
        trust_remote_code=bool(data.get("trust_remote_code", False)),
        recipe=recipe,
        dtype_target=str(dtype.get("target") or "float32"),
        dtype_fallback=dtype.get("fallback"),
        keep_fp32_modules=_names(dtype.get("keep_fp32_modules"), "dtype.keep_fp32_modules"),
        dry_run_max_layers=max_layers,
        config_overrides=overrides,
        sentence_transformers_pooling=data.get("sentence_transformers_pooling"),
        sentence_transformers_normalize=bool(data.get("sentence_transformers_normalize", False)),
        set_default_device=bool(data.get("set_default_device", False)),
        workload={k: v for k, v in workload.items() if v is not None},
        device_plan=device_plan,
        proxy_depth=proxy_depth,
        proxy_of=proxy_of,
    )


def load_spec(path: Path) -> RunSpec:
    """Load and validate adaptation.json; every problem is one SpecError line."""
    try:
        text = Path(path).read_text()
    except FileNotFoundError:
        raise SpecError(f"spec file not found: {path}") from None
    except OSError as exc:
        raise SpecError(f"cannot read spec file {path}: {exc.strerror}") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise SpecError(f"spec file {path} is not valid JSON (line {exc.lineno}: {exc.msg})") from None
    spec = parse_spec(data)
    if spec.path and not Path(spec.path).is_absolute():
        # A relative model path is relative to the adaptation directory, wherever it runs from.
        spec = replace(spec, path=str((Path(path).parent / spec.path).resolve()))
    return spec
