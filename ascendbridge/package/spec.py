"""The adaptation spec (`adaptations/<name>/adaptation.json`): the single source every generated
file is rendered from. The healer fixes failures by editing the spec, never the rendered files,
so re-rendering an unchanged spec reproduces the package byte for byte.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field

from ab_runtime import accuracy_standard
from ab_runtime.fileops import write_text_atomic

# Re-exported: a model run ends with exactly one line starting with this marker followed by a JSON
# object (ab_runtime/result.py writes and reads it); gates parse that line, never free text.
from ab_runtime.result import RESULT_MARKER  # noqa: F401
from ab_runtime.spec import InputRecipe as RuntimeRecipe
from ab_runtime.spec import proxy_label

SPEC_FILE = "adaptation.json"
SPEC_VERSION = 1


# Spec keys no agent (adapter, healer) may change, each with the reason given when a proposal tries.
FORBIDDEN_KEYS: dict[str, str] = {
    "name": "the adaptation's name is the board's",
    "model": "the model's identity and source are a person's registration",
    "spec_version": "the spec version belongs to the framework",
    "applied_fixes": "the fix history is provenance, written by the program",
    "trust_remote_code": "running a model's remote code is a person's decision on the board",
    "tolerances": "accuracy thresholds are the framework's standard; only a person may request a bounded change",
}


def forbidden_change(changed_keys: Any, role: str) -> str | None:
    """The one-line refusal for a proposal that changes a forbidden key (top level of `changed_keys`
    such as "dtype" or "tolerances/float32"), or None when it touches none."""
    hit = sorted({str(key).split("/")[0] for key in changed_keys} & set(FORBIDDEN_KEYS))
    if not hit:
        return None
    reasons = "; ".join(f"{key}: {FORBIDDEN_KEYS[key]}" for key in hit)
    return f"the agent changed {', '.join(hit)}, which the {role} role may not change ({reasons})"


def load_proposal(original: AdaptationSpec, copy: Path, changed: list[str], role: str) -> AdaptationSpec | str:
    """An agent's proposal in its workspace copy: the spec it wrote, or the one-line refusal (it
    changed a file other than the spec, wrote no valid spec, or changed a key its role may not)."""
    if changed != [SPEC_FILE]:
        others = [p for p in changed if p != SPEC_FILE]
        article = "an" if role[0] in "aeiou" else "a"
        return f"{article} {role} may change only {SPEC_FILE}; it changed {', '.join(others[:5]) or 'nothing'}"
    try:
        proposed = AdaptationSpec.load(copy)
    except ValueError as exc:  # pydantic's ValidationError included
        return f"the proposed {SPEC_FILE} is not a valid spec: {str(exc).splitlines()[0]}"
    before, after = original.model_dump(mode="json"), proposed.model_dump(mode="json")
    return forbidden_change([k for k in set(before) | set(after) if before.get(k) != after.get(k)], role) or proposed


class ProxyDepth(BaseModel):
    """A reduced-depth proxy a person registered (`register_model --depth N`): every stage builds the
    same architecture with `layers` layers per layer stack; `of` is the model's own count."""

    model_config = ConfigDict(extra="forbid")

    layers: int = Field(ge=1)
    of: int | None = Field(None, ge=1)

    def label(self) -> str:
        return proxy_label(self.layers, self.of)


class ModelSource(BaseModel):
    model_config = ConfigDict(extra="forbid")

    model_id: str
    source: Literal["huggingface", "local", "hf-cache"] = "huggingface"
    path: str | None = None  # local directory (source=local) or cache dir (hf-cache)
    revision: str | None = None
    has_weights: bool = True  # False: config-only model, always config-initialised
    proxy: ProxyDepth | None = None  # None: the full depth


_RECIPE = RuntimeRecipe()  # the defaults, once: the runtime reads a spec without them the same way


class InputRecipe(BaseModel):
    """How the task family builds deterministic inputs (see adaptation runtime families)."""

    model_config = ConfigDict(extra="forbid")

    batch_size: int = _RECIPE.batch_size
    seq_len: int = _RECIPE.seq_len
    decoder_seq_len: int = _RECIPE.decoder_seq_len
    image_size: int | None = _RECIPE.image_size
    num_mel_bins: int | None = _RECIPE.num_mel_bins
    audio_frames: int | None = _RECIPE.audio_frames
    seed: int = _RECIPE.seed
    input_names: list[str] = Field(default_factory=list)  # from the forward signature


class DtypePolicy(BaseModel):
    model_config = ConfigDict(extra="forbid")

    reference: str = "float32"  # CPU reference dtype
    target: str = "float32"  # dtype on the chosen device
    fallback: str | None = None  # used when the device rejects `target` (healer sets it)
    # Module classes kept in float32 inside lower-precision runs (the healer's remedy for an
    # operator without a kernel for that dtype, e.g. FNet's FFT in bfloat16 on CPU).
    keep_fp32_modules: list[str] = Field(default_factory=list)


def _tolerance_requests(value: Any) -> dict[str, dict[str, float]]:
    """The spec's threshold requests as {dtype: {key: value}} (legacy flat keys translated).

    The numbers themselves belong to the framework's accuracy standard
    (ab_runtime/accuracy_standard.py): a request looser than its bound is kept
    here, refused by the standard and reported by the benchmark gate.
    """
    return accuracy_standard.normalize(value)


class WorkloadSpec(BaseModel):
    """The workload profile the benchmark and the optimizer measure (ab_runtime/workloads.py):
    its name (None: the task family's default) and any sizes that differ from the profile's."""

    model_config = ConfigDict(extra="forbid")

    name: Literal["generation", "encoder_generation", "batch_sweep", "forward"] | None = None
    prompt_len: int | None = Field(None, ge=1)
    new_tokens: int | None = Field(None, ge=2)
    batch: int | None = Field(None, ge=1)
    sweep: list[Annotated[int, Field(ge=1)]] | None = Field(None, min_length=1)
    headline_batch: int | None = Field(None, ge=1)


class AppliedFix(BaseModel):
    model_config = ConfigDict(extra="forbid")

    rule: str
    description: str
    changes: dict[str, Any] = Field(default_factory=dict)
    attempt: int | None = None


class AdaptationSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    spec_version: int = SPEC_VERSION
    name: str  # adaptation directory name (from the board)
    model: ModelSource
    task_family: str
    model_class: str  # transformers class name, e.g. "BertModel", "AutoModelForCausalLM"
    architecture: str | None = None
    model_type: str | None = None
    trust_remote_code: bool = False
    inputs: InputRecipe = Field(default_factory=InputRecipe)
    dtype: DtypePolicy = Field(default_factory=DtypePolicy)
    # Requests against the framework's accuracy standard, {dtype: {threshold: value}}; a person's
    # decision (agents may not change it), bounded and reported by the gates.
    tolerances: Annotated[dict[str, dict[str, float]], BeforeValidator(_tolerance_requests)] = Field(
        default_factory=dict
    )
    # Dry run: at most this many layers are built (recorded in output); None = the full depth.
    dry_run_max_layers: int | None = None
    config_overrides: dict[str, Any] = Field(default_factory=dict)
    # Extra pip requirements for every profile, e.g. {"sentencepiece": ">=0.2"}.
    dependencies: dict[str, str] = Field(default_factory=dict)
    transformers_requirement: str = "transformers>=4.46"
    python_requirement: str = ">=3.10"
    sentence_transformers_pooling: str | None = None  # "mean" | "cls" | None
    # modules.json ends with a Normalize module: sentence embeddings are L2-normalised, as
    # sentence-transformers' encode() returns them.
    sentence_transformers_normalize: bool = False
    # Healer fix for device mismatches: build and run the model with the run device as torch's
    # default device (torch.set_default_device), so tensors model code creates without an
    # explicit device land on the run device.
    set_default_device: bool = False
    workload: WorkloadSpec = Field(default_factory=WorkloadSpec)
    applied_fixes: list[AppliedFix] = Field(default_factory=list)
    # Discovery's plan for a model larger than one device (ascendbridge/discovery/decisions.py):
    # {"devices": N, "strategy": "device_map", "tensor_parallel_degree": T, ...}; the team lead gives
    # its timed stages N devices at once. None: one device.
    device_plan: dict[str, Any] | None = None

    def to_json(self) -> str:
        """The exact text of adaptation.json (stable key order, so re-saving is byte-identical)."""
        return json.dumps(self.model_dump(mode="json"), indent=2, sort_keys=True) + "\n"

    def save(self, directory: Path) -> Path:
        path = Path(directory) / SPEC_FILE
        write_text_atomic(path, self.to_json())
        return path

    @classmethod
    def load(cls, directory: Path) -> AdaptationSpec:
        path = Path(directory) / SPEC_FILE
        try:
            return cls.model_validate_json(path.read_text())
        except FileNotFoundError:
            raise MissingSpecError(f"no {SPEC_FILE} in {directory}") from None


class MissingSpecError(ValueError):
    """The directory holds no adaptation.json: no package there (never made, deleted, or made
    under another adaptations folder), which no retry changes."""


def apply_changes(spec: AdaptationSpec, changes: dict[str, Any]) -> AdaptationSpec:
    """Return a validated copy of `spec` with each "a/b/c" path set to its value."""
    data = spec.model_dump(mode="json")
    for path, value in changes.items():
        *parents, leaf = path.split("/")
        node = data
        for key in parents:
            node = node.setdefault(key, {})
        node[leaf] = value
    return AdaptationSpec.model_validate(data)
