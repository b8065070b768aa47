"""Real inputs through the model's own preprocessor: `demo.py --text / --image / --audio`.

A VLM reads --image with an optional --text prompt (the image tokens placed by its layout in
ab_runtime.vision_inputs, the prompt in the tokenizer's chat template when it ships one); a
CLIP/SigLIP model reads --image with --labels, the candidate texts of zero-shot classification.

Seeded random inputs prove a package runs; a person wants to see the model answer their input.
The tokenizer, image processor or feature extractor is the one the model ships (loaded from the
same place as its weights), so the package sees exactly what the model's own library would feed
it. Only inputs the model's forward accepts are kept.
"""

from __future__ import annotations

import wave
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from .errors import SpecError, UnsupportedModel
from .inputs import Signature
from .loading import source_kwargs
from .spec import TOKENIZER_FILES, RunSpec
from .vision_tasks import sigmoid_scores

TEXT_FAMILIES = frozenset(
    {
        "causal_lm",
        "masked_lm",
        "feature_extraction",
        "sequence_classification",
        "question_answering",
        "token_classification",
        "seq2seq",
        "llm_embedding",
        "reranker",
    }
)
IMAGE_FAMILIES = frozenset(
    {
        "image_classification",
        "vision_seq2seq",
        "object_detection",
        "semantic_segmentation",
        "depth_estimation",
        "image_text_to_text",
        "zero_shot_image_classification",
    }
)
AUDIO_FAMILIES = frozenset({"speech_seq2seq", "ctc_speech_recognition", "audio_classification"})
MAX_TEXT_TOKENS = 512
VLM_PROMPT = "Describe this image."  # a VLM's prompt when --image comes without --text
IMAGE_PLACE = "\x00image\x00"  # where the image block goes in the rendered prompt (never in real text)
SIGLIP_TEXT_TOKENS = 64  # SigLIP was trained on texts padded to 64 tokens (as transformers' pipeline pads)


def _load(kind: str, spec: RunSpec) -> Any:
    import transformers

    ident, kwargs, origin = source_kwargs(spec)
    kwargs = {
        k: v for k, v in kwargs.items() if k in ("trust_remote_code", "revision", "cache_dir", "local_files_only")
    }
    try:
        return getattr(transformers, kind).from_pretrained(ident, **kwargs)
    except (OSError, ValueError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise UnsupportedModel(f"the model ships no usable {kind.removeprefix('Auto')} ({origin}): {first}") from None


def load_tokenizer(spec: RunSpec) -> Any:
    """The tokenizer the model ships; UnsupportedModel (one line) when it ships none. For a directory
    without tokenizer files transformers 5 builds one instead of raising, with an empty vocabulary
    (GPT-2) or only its special tokens (GPT-NeoX two, Gemma five): that is no tokenizer either."""
    ident, _, origin = source_kwargs(spec)
    if ident == spec.path and not any((Path(ident) / name).is_file() for name in TOKENIZER_FILES):
        raise UnsupportedModel(f"the model ships no usable Tokenizer ({origin}): no tokenizer files")
    tokenizer = _load("AutoTokenizer", spec)
    if getattr(tokenizer, "vocab_size", None) == 0:
        raise UnsupportedModel(f"the model ships no usable Tokenizer ({origin}): the vocabulary is empty")
    return tokenizer


def has_ordinary_tokens(tokenizer: Any) -> bool:
    """Whether any token id below vocab_size is not a special token: vLLM's random benchmark prompts
    are drawn from those (a tokenizer of special tokens only left it none: IndexError)."""
    size = getattr(tokenizer, "vocab_size", None)
    special = set(getattr(tokenizer, "all_special_ids", None) or ())
    return not isinstance(size, int) or any(i not in special for i in range(size))


def tokenize(spec: RunSpec, texts: Sequence[str]) -> dict[str, torch.Tensor]:
    """The model's tokenizer over `texts`, padded to one batch (as sentence-transformers does)."""
    tokenizer = load_tokenizer(spec)
    if len(texts) > 1 and tokenizer.pad_token is None:  # GPT-2-style tokenizers ship no pad token
        if tokenizer.eos_token is None:
            raise UnsupportedModel("the tokenizer has neither a pad nor an eos token to pad a batch of texts with")
        tokenizer.pad_token = tokenizer.eos_token
    return dict(
        tokenizer(list(texts), padding=len(texts) > 1, truncation=True, max_length=MAX_TEXT_TOKENS, return_tensors="pt")
    )


def _open_image(path: Path) -> Any:
    from PIL import Image

    try:
        return Image.open(path).convert("RGB")
    except (OSError, ValueError) as exc:
        raise SpecError(f"cannot read image {path}: {exc}") from None


def parse_labels(text: str) -> list[str]:
    """`--labels "a cat,a dog"` -> the candidate texts; empty pieces are a one-line error."""
    labels = [label.strip() for label in text.split(",")]
    if not all(labels):
        raise SpecError(f"--labels: expected comma-separated candidate texts, got {text!r}")
    return labels


def _prompt_ids(tokenizer: Any, prompt: str, block: list[int]) -> list[int]:
    """The prompt as one user turn (the image first, then the text) in the tokenizer's chat
    template when it ships one, with the image block where the template puts the image."""
    if getattr(tokenizer, "chat_template", None):
        text = tokenizer.apply_chat_template(
            [{"role": "user", "content": IMAGE_PLACE + prompt}], add_generation_prompt=True, tokenize=False
        )
        lead: list[int] = []
    else:
        text = IMAGE_PLACE + prompt
        lead = [tokenizer.bos_token_id] if tokenizer.bos_token_id is not None else []
    before, after = text.split(IMAGE_PLACE, 1)

    def encode(piece: str) -> list[int]:
        return tokenizer(piece, add_special_tokens=False)["input_ids"] if piece else []

    return lead + encode(before) + block + encode(after)


def _image(spec: RunSpec, config: Any, path: Path, prompt: str | None, labels: str | None) -> dict[str, torch.Tensor]:
    pixels = dict(_load("AutoImageProcessor", spec)(images=_open_image(path), return_tensors="pt"))
    if spec.task_family == "zero_shot_image_classification":
        padding = (
            dict(padding="max_length", max_length=SIGLIP_TEXT_TOKENS) if sigmoid_scores(config) else dict(padding=True)
        )
        tokenizer = load_tokenizer(spec)
        texts = tokenizer(parse_labels(labels or ""), truncation=True, return_tensors="pt", **padding)
        return {**dict(texts), **pixels}
    if spec.task_family == "image_text_to_text":
        from .vision_inputs import image_text_batch, layout_for

        layout, reason = layout_for(config)
        if layout is None:
            raise UnsupportedModel(f"--image needs the model's image layout; {reason}")
        ids = _prompt_ids(load_tokenizer(spec), prompt or VLM_PROMPT, layout.block(config, pixels, 0))
        return image_text_batch(config, layout, pixels, [ids])
    return pixels


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


def _input_kind(
    family: str, text: str | None, image: str | None, audio: str | None, labels: str | None
) -> tuple[str, str]:
    """Which real input the run reads; combinations the family does not take are a one-line error."""
    if labels is not None and not (image and family == "zero_shot_image_classification"):
        raise SpecError("--labels (candidate texts) go with --image, for zero-shot image classification only")
    if family == "zero_shot_image_classification" and image and labels is None:
        raise SpecError('zero-shot image classification needs candidate texts: --labels "a cat,a dog"')
    if family == "image_text_to_text" and image and text and not audio:
        return "image", image  # the text is the VLM's prompt
    given = [(name, value) for name, value in (("text", text), ("image", image), ("audio", audio)) if value]
    if len(given) != 1:
        raise SpecError("give exactly one of --text, --image, --audio (a VLM: --image with --text)")
    kind, value = given[0]
    takes = {"text": TEXT_FAMILIES, "image": IMAGE_FAMILIES, "audio": AUDIO_FAMILIES}
    if family not in takes[kind]:
        accepted = [k for k, families in takes.items() if family in families]
        raise SpecError(
            f"task family {family} takes {', '.join('--' + a for a in accepted) or 'no real input'}, not --{kind}"
        )
    return kind, value


def real_inputs(
    spec: RunSpec,
    model: torch.nn.Module,
    text: str | None = None,
    image: str | None = None,
    audio: str | None = None,
    labels: str | None = None,
) -> dict[str, torch.Tensor]:
    """Preprocessed inputs for the kind of input given; a family that does not take that kind of
    input (or that combination) is a one-line error naming what it takes."""
    kind, value = _input_kind(spec.task_family, text, image, audio, labels)
    if kind == "text":
        batch = tokenize(spec, [value])
    else:
        path = Path(value)
        if not path.is_file():
            raise SpecError(f"no such file: {path}")
        batch = _image(spec, model.config, path, text, labels) if kind == "image" else _audio(spec, path)
    if spec.task_family in ("seq2seq", "speech_seq2seq", "vision_seq2seq"):
        start = getattr(model.config, "decoder_start_token_id", None)
        if start is None:
            raise UnsupportedModel("the config has no decoder_start_token_id to start decoding from")
        batch["decoder_input_ids"] = torch.full((next(iter(batch.values())).shape[0], 1), int(start))
    signature = Signature.of(model)
    float_dtype = next((p.dtype for p in model.parameters() if p.is_floating_point()), torch.float32)
    return {
        k: (v.to(float_dtype) if v.is_floating_point() else v)
        for k, v in batch.items()
        if isinstance(v, torch.Tensor) and (k in signature.accepted or signature.takes_kwargs)
    }
