"""The adaptation spec (`adaptations/<name>/adaptation.json`): the single source every generated
file is rendered from. The healer fixes failures by editing the spec, never the rendered files,
so re-rendering an unchanged spec reproduces the package byte for byte.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal, Optional

from pydantic import BaseModel, ConfigDict, Field

SPEC_FILE = "adaptation.json"
SPEC_VERSION = 1
# demo.py, accuracy_run.py and accuracy_run_perf.py print exactly one line starting with this
# marker followed by a JSON object; gates parse that line, never free text.
RESULT_MARKER = "ASCENDBRIDGE_RESULT "


class ModelSource(BaseModel):
    model_config = ConfigDict(extra="forbid")

    model_id: str
    source: Literal["huggingface", "local", "hf-cache"] = "huggingface"
    path: Optional[str] = None  # local directory (source=local) or cache dir (hf-cache)
    revision: Optional[str] = None
    has_weights: bool = True  # False: config-only model, always config-initialised


class InputRecipe(BaseModel):
    """How the task family builds deterministic inputs (see adaptation runtime families)."""

    model_config = ConfigDict(extra="forbid")

    batch_size: int = 2
    seq_len: int = 32
    decoder_seq_len: int = 8
    image_size: Optional[int] = None
    num_mel_bins: Optional[int] = None
    audio_frames: Optional[int] = None
    seed: int = 1234
    input_names: list[str] = Field(default_factory=list)  # from the forward signature


class DtypePolicy(BaseModel):
    model_config = ConfigDict(extra="forbid")

    reference: str = "float32"  # CPU reference dtype
    target: str = "float32"  # dtype on the chosen device
    fallback: Optional[str] = None  # used when the device rejects `target` (healer sets it)


class Tolerances(BaseModel):
    model_config = ConfigDict(extra="forbid")

    cosine_min: float = 0.99
    max_abs_err_scaled: float = 1e-3
    fp32_cosine_min: float = 0.9999


class AppliedFix(BaseModel):
    model_config = ConfigDict(extra="forbid")

    rule: str
    description: str
    changes: dict[str, Any] = Field(default_factory=dict)
    attempt: Optional[int] = None


class AdaptationSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    spec_version: int = SPEC_VERSION
    name: str  # adaptation directory name (from the board)
    model: ModelSource
    task_family: str
    model_class: str  # transformers class name, e.g. "BertModel", "AutoModelForCausalLM"
    architecture: Optional[str] = None
    model_type: Optional[str] = None
    trust_remote_code: bool = False
    inputs: InputRecipe = Field(default_factory=InputRecipe)
    dtype: DtypePolicy = Field(default_factory=DtypePolicy)
    tolerances: Tolerances = Field(default_factory=Tolerances)
    # Dry run: at most this many layers are built (recorded in output); None = the full depth.
    dry_run_max_layers: Optional[int] = None
    config_overrides: dict[str, Any] = Field(default_factory=dict)
    # Extra pip requirements for every profile, e.g. {"sentencepiece": ">=0.2"}.
    dependencies: dict[str, str] = Field(default_factory=dict)
    transformers_requirement: str = "transformers>=4.46"
    python_requirement: str = ">=3.10"
    sentence_transformers_pooling: Optional[str] = None  # "mean" | "cls" | None
    # modules.json ends with a Normalize module: sentence embeddings are L2-normalised, as
    # sentence-transformers' encode() returns them.
    sentence_transformers_normalize: bool = False
    # Healer fix for device mismatches: build and run the model with the run device as torch's
    # default device (torch.set_default_device), so tensors model code creates without an
    # explicit device land on the run device.
    set_default_device: bool = False
    applied_fixes: list[AppliedFix] = Field(default_factory=list)

    def to_json(self) -> str:
        """The exact text of adaptation.json (stable key order, so re-saving is byte-identical)."""
        return json.dumps(self.model_dump(mode="json"), indent=2, sort_keys=True) + "\n"

    def save(self, directory: Path) -> Path:
        path = Path(directory) / SPEC_FILE
        tmp = path.with_suffix(".json.tmp")
        tmp.write_text(self.to_json())
        tmp.replace(path)
        return path

    @classmethod
    def load(cls, directory: Path) -> "AdaptationSpec":
        path = Path(directory) / SPEC_FILE
        try:
            return cls.model_validate_json(path.read_text())
        except FileNotFoundError:
            raise ValueError(f"no {SPEC_FILE} in {directory}") from None
