"""Turn a board model record (with discovery's ModelInfo in its metadata) into an AdaptationSpec.

This is the built-in adapter's whole decision: which class to load, which inputs the task family
feeds, how deep a dry run may build, which pooling a sentence-transformers model needs. Models
it cannot decide for raise `AdaptationRefused` with a diagnosis the board can show; that is also
where an LLM adapter can later be asked (`ask_llm_adapter`).
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from ab_runtime.memory import DEFAULT_DRY_RUN_MAX_GB, GiB
from adaptation.agent_adapter import ask_adapter_agent
from adaptation.settings import AdaptationSettings
from ascendbridge.board.records import ModelRecord
from ascendbridge.discovery.model_info import ModelInfo
from ascendbridge.package.spec import AdaptationSpec, InputRecipe, ModelSource, ProxyDepth
from ascendbridge.settings import section
from ascendbridge.task_families import TASK_FAMILIES

# What each family feeds the model (the runtime derives the exact set from forward()); a text model's
# tokenizer gives TEXT_INPUTS.
TEXT_INPUTS = ("input_ids", "attention_mask")
FAMILY_INPUTS: dict[str, tuple[str, ...]] = {
    "causal_lm": TEXT_INPUTS,
    "masked_lm": TEXT_INPUTS,
    "feature_extraction": TEXT_INPUTS,
    "sequence_classification": TEXT_INPUTS,
    "question_answering": TEXT_INPUTS,
    "token_classification": TEXT_INPUTS,
    "seq2seq": (*TEXT_INPUTS, "decoder_input_ids"),
    "image_classification": ("pixel_values",),
    "speech_seq2seq": ("input_features", "decoder_input_ids"),
    "vision_seq2seq": ("pixel_values", "decoder_input_ids"),
    # audio, time series, LLM embedders and rerankers (issue 13)
    "ctc_speech_recognition": ("input_values",),
    "audio_classification": ("input_values",),
    "time_series_forecasting": ("past_values",),
    "llm_embedding": TEXT_INPUTS,
    "reranker": TEXT_INPUTS,
    # --- vision families (issue 13) ---
    "image_text_to_text": (*TEXT_INPUTS, "pixel_values"),  # + image grid / token types per model
    "zero_shot_image_classification": (*TEXT_INPUTS, "pixel_values"),
    "object_detection": ("pixel_values",),
    "semantic_segmentation": ("pixel_values",),
    "depth_estimation": ("pixel_values",),
    # --- end vision families ---
}
# Families whose sentence embedding is pooled even without modules.json, and how.
DEFAULT_POOLING = {"llm_embedding": "lasttoken"}
IMAGE_FAMILIES = (
    "image_classification",
    "vision_seq2seq",
    "zero_shot_image_classification",
    "object_detection",
    "semantic_segmentation",
    "depth_estimation",
)
VISION_SUBCONFIGS = ("vision_config", "backbone_config")
# Image processors (a VLM's seeded inputs go through its own, even in a dry run) and demo.py
# --image need PIL, which transformers does not install: the package declares it.
PIL_FAMILIES = (*IMAGE_FAMILIES, "image_text_to_text")
PIL_REQUIREMENT = {"pillow": ">=10"}

# A config-initialised dry run holds the fp32 weights in memory; above this budget the depth is
# reduced (ASCENDBRIDGE_DRY_RUN_MAX_BYTES overrides it): the runtime's own default, so the spec and the
# run agree.
DEFAULT_DRY_RUN_MAX_BYTES = int(DEFAULT_DRY_RUN_MAX_GB * GiB)
BYTES_PER_PARAM_FP32 = 4
DEFAULT_SEQ_LEN = 32
_POSITION_KEYS = ("max_position_embeddings", "n_positions", "max_seq_len", "seq_length")
_LAYER_KEYS = ("num_hidden_layers", "n_layer", "num_layers", "n_layers", "encoder_layers")


class AdaptationRefused(ValueError):
    """The built-in adapter has no answer for this model; `diagnosis` says why."""

    def __init__(self, rule: str, summary: str, **details: Any) -> None:
        super().__init__(summary)
        self.diagnosis: dict[str, Any] = {"rule": rule, "summary": summary, **details}


def ask_llm_adapter(record: ModelRecord, refusal: AdaptationRefused) -> AdaptationSpec | None:
    """Hook for an LLM adapter: return a spec for a model the rules refused.

    Without a configured backend there is no answer, and the refusal stands
    (adaptation/agent_adapter.py: memory first, then the adapter role's backend, gated).
    """
    return ask_adapter_agent(record, refusal.diagnosis)


def _model_info(record: ModelRecord) -> ModelInfo | None:
    if not record.metadata:
        return None
    try:
        return ModelInfo.model_validate(record.metadata)
    except ValidationError as exc:
        raise AdaptationRefused(
            "corrupt_metadata",
            f"discovered metadata of '{record.model_id}' is unreadable: {exc.errors()[0]['msg']} (re-run discovery)",
        ) from None


def _first_int(cfg: dict[str, Any], keys: tuple[str, ...]) -> int | None:
    for key in keys:
        value = cfg.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return None


def _dry_run_budget() -> int:
    """ASCENDBRIDGE_DRY_RUN_MAX_BYTES (adaptation settings); a bad value is ValueError, one line."""
    return section(AdaptationSettings).dry_run_max_bytes or DEFAULT_DRY_RUN_MAX_BYTES


def dry_run_max_layers(parameter_count: int | None, num_layers: int | None, budget: int) -> int | None:
    """Layers a config-initialised fp32 model may build within `budget` bytes (None = all).

    The per-layer size is over-estimated (embeddings counted in), so the result errs small.
    """
    if not parameter_count or not num_layers:
        return None
    if parameter_count * BYTES_PER_PARAM_FP32 <= budget:
        return None
    per_layer = parameter_count * BYTES_PER_PARAM_FP32 / num_layers
    return max(1, min(num_layers - 1, int(budget // per_layer)))


def _inputs(family: str, cfg: dict[str, Any]) -> InputRecipe:
    recipe = InputRecipe(input_names=list(FAMILY_INPUTS[family]))
    max_positions = _first_int(cfg, _POSITION_KEYS)
    if max_positions:
        recipe.seq_len = min(DEFAULT_SEQ_LEN, max_positions)
    if family in IMAGE_FAMILIES:
        vision = encoder if family == "vision_seq2seq" and isinstance(encoder := cfg.get("encoder"), dict) else cfg
        size = vision.get("image_size")
        for sub in VISION_SUBCONFIGS:  # CLIP's vision_config, DPT / Depth Anything's backbone_config
            if size is None and isinstance(cfg.get(sub), dict):
                size = cfg[sub].get("image_size")
        if isinstance(size, (list, tuple)) and size:
            size = size[0]
        if isinstance(size, int) and size > 0:
            recipe.image_size = size
    if family == "speech_seq2seq":
        recipe.num_mel_bins = _first_int(cfg, ("num_mel_bins",))
        source_positions = _first_int(cfg, ("max_source_positions",))
        if source_positions:
            recipe.audio_frames = 2 * source_positions  # Whisper's conv stride 2
    return recipe


def build_spec(record: ModelRecord) -> AdaptationSpec:
    """The spec for one registered, discovered model; raise AdaptationRefused when undecidable."""
    info = _model_info(record)
    cfg = info.config if info else {}
    family = record.task_family or (info.task_family if info else None)
    if family not in TASK_FAMILIES:
        reason = info.task_family_reason if info and info.task_family_reason else "discovery found no task family"
        raise AdaptationRefused(
            "unknown_task_family",
            f"no built-in adaptation for '{record.model_id}': {reason}",
            architecture=record.architecture,
            model_type=record.model_type,
            task_family=family,
        )
    needs_remote = bool(info and info.needs_remote_code)
    if needs_remote and not record.allow_remote_code:
        raise AdaptationRefused(
            "remote_code_not_allowed",
            f"'{record.model_id}' needs code from its repository and the board does not allow it "
            "(a person can allow remote code for this model on the board)",
        )
    architectures = info.architectures if info else []
    model_class = (info.model_class if info else None) or (architectures[0] if architectures else TASK_FAMILIES[family])
    parameter_count = record.parameter_count or (info.parameter_count if info else None)
    num_layers = (info.num_layers if info else None) or _first_int(cfg, _LAYER_KEYS)
    has_weights = info.has_weights if info else record.source != "local"
    # local: the model directory; hf-cache: the cache directory the model was registered with
    # (None = the default cache), as the spec's ModelSource.path documents.
    path = record.path if record.source != "local" else (info.local_dir if info else None) or record.path
    max_layers = dry_run_max_layers(parameter_count, num_layers, _dry_run_budget())
    proxy = ProxyDepth(layers=record.proxy_depth, of=num_layers) if record.proxy_depth else None
    if proxy is not None and max_layers is not None and max_layers >= proxy.layers:
        max_layers = None  # the proxy's layers fit the dry-run budget already
    return AdaptationSpec(
        name=record.adaptation_name,
        model=ModelSource(
            model_id=record.model_id,
            source=record.source,  # the board validates sources
            path=path,
            revision=record.revision,
            has_weights=has_weights,
            proxy=proxy,
        ),
        task_family=family,
        model_class=model_class,
        architecture=record.architecture or (architectures[0] if architectures else None),
        model_type=record.model_type or (info.model_type if info else None),
        trust_remote_code=needs_remote and record.allow_remote_code,
        inputs=_inputs(family, cfg),
        dry_run_max_layers=max_layers,
        sentence_transformers_pooling=(info.sentence_transformers_pooling if info else None)
        or DEFAULT_POOLING.get(family),
        sentence_transformers_normalize=bool(info.sentence_transformers_normalize) if info else False,
        device_plan=info.decision.plan if info and info.decision else None,
        dependencies=dict(PIL_REQUIREMENT) if family in PIL_FAMILIES else {},
    )
