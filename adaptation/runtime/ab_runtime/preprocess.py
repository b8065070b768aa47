"""Real inputs through the model's own preprocessor: `demo.py --text / --image / --audio`.

Seeded random inputs prove a package runs; a person wants to see the model answer their input.
The tokenizer, image processor or feature extractor is the one the model ships (loaded from the
same place as its weights), so the package sees exactly what the model's own library would feed
it. Only inputs the model's forward accepts are kept.
"""

from __future__ import annotations

import wave
from pathlib import Path
from typing import Any, Optional, Sequence

import torch

from .errors import SpecError, UnsupportedModel
from .inputs import Signature
from .loading import source_kwargs
from .spec import RunSpec

TEXT_FAMILIES = frozenset({"causal_lm", "masked_lm", "feature_extraction", "sequence_classification",
                           "question_answering", "token_classification", "seq2seq"})
IMAGE_FAMILIES = frozenset({"image_classification", "vision_seq2seq",
                            "object_detection", "semantic_segmentation", "depth_estimation"})
AUDIO_FAMILIES = frozenset({"speech_seq2seq"})
MAX_TEXT_TOKENS = 512


def _load(kind: str, spec: RunSpec) -> Any:
    import transformers

    ident, kwargs, origin = source_kwargs(spec)
    kwargs = {k: v for k, v in kwargs.items() if k in ("trust_remote_code", "revision", "cache_dir", "local_files_only")}
    try:
        return getattr(transformers, kind).from_pretrained(ident, **kwargs)
    except (OSError, ValueError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise UnsupportedModel(f"the model ships no usable {kind.removeprefix('Auto')} ({origin}): {first}") from None


def tokenize(spec: RunSpec, texts: Sequence[str]) -> dict[str, torch.Tensor]:
    """The model's tokenizer over `texts`, padded to one batch (as sentence-transformers does)."""
    tokenizer = _load("AutoTokenizer", spec)
    return dict(tokenizer(list(texts), padding=True, truncation=True, max_length=MAX_TEXT_TOKENS,
                          return_tensors="pt"))


def _image(spec: RunSpec, path: Path) -> dict[str, torch.Tensor]:
    from PIL import Image

    try:
        image = Image.open(path).convert("RGB")
    except (OSError, ValueError) as exc:
        raise SpecError(f"cannot read image {path}: {exc}") from None
    return dict(_load("AutoImageProcessor", spec)(images=image, return_tensors="pt"))


def _audio(spec: RunSpec, path: Path) -> dict[str, torch.Tensor]:
    """A 16-bit PCM WAV file (mono, or the first channel), at the rate the feature extractor wants."""
    try:
        with wave.open(str(path), "rb") as fh:
            if fh.getsampwidth() != 2:
                raise SpecError(f"{path}: only 16-bit PCM WAV is read (sample width {fh.getsampwidth()} bytes)")
            rate, channels = fh.getframerate(), fh.getnchannels()
            raw = fh.readframes(fh.getnframes())
    except (OSError, wave.Error, EOFError) as exc:
        raise SpecError(f"cannot read audio {path}: {exc}") from None
    samples = torch.frombuffer(bytearray(raw), dtype=torch.int16).reshape(-1, channels)[:, 0].float() / 32768.0
    extractor = _load("AutoFeatureExtractor", spec)
    wanted = getattr(extractor, "sampling_rate", rate)
    if wanted != rate:
        raise SpecError(f"{path}: sampled at {rate} Hz, the model's feature extractor expects {wanted} Hz")
    return dict(extractor(samples.numpy(), sampling_rate=rate, return_tensors="pt"))


def real_inputs(spec: RunSpec, model: torch.nn.Module, text: Optional[str] = None,
                image: Optional[str] = None, audio: Optional[str] = None) -> dict[str, torch.Tensor]:
    """Preprocessed inputs for the one kind of input given; a family that does not take that
    kind of input is a one-line error naming what it takes."""
    given = [(name, value) for name, value in (("text", text), ("image", image), ("audio", audio)) if value]
    if len(given) != 1:
        raise SpecError("give exactly one of --text, --image, --audio")
    kind, value = given[0]
    takes = {"text": TEXT_FAMILIES, "image": IMAGE_FAMILIES, "audio": AUDIO_FAMILIES}
    if spec.task_family not in takes[kind]:
        accepted = [k for k, families in takes.items() if spec.task_family in families]
        raise SpecError(f"task family {spec.task_family} takes {', '.join('--' + a for a in accepted) or 'no real input'},"
                        f" not --{kind}")
    if kind == "text":
        batch = tokenize(spec, [value])
    else:
        path = Path(value)
        if not path.is_file():
            raise SpecError(f"no such file: {path}")
        batch = _image(spec, path) if kind == "image" else _audio(spec, path)
    if spec.task_family in ("seq2seq", "speech_seq2seq", "vision_seq2seq"):
        start = getattr(model.config, "decoder_start_token_id", None)
        if start is None:
            raise UnsupportedModel("the config has no decoder_start_token_id to start decoding from")
        batch["decoder_input_ids"] = torch.full((next(iter(batch.values())).shape[0], 1), int(start))
    signature = Signature.of(model)
    float_dtype = next((p.dtype for p in model.parameters() if p.is_floating_point()), torch.float32)
    return {k: (v.to(float_dtype) if v.is_floating_point() else v) for k, v in batch.items()
            if isinstance(v, torch.Tensor) and (k in signature.accepted or signature.takes_kwargs)}
