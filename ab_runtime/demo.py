"""`demo.py` of every adaptation: run the model once and say honestly what ran where.

Inputs are seeded synthetic tensors, or with --text / --image / --audio a real input through the
model's own tokenizer / image processor / feature extractor (ab_runtime.preprocess). With real
weights and a tokenizer the run ends with the model's answer in words (a causal LM's generated
text, a classifier's label name, an embedder's similarity of two sentences, a VLM's text about
--image, the best of --labels for a CLIP/SigLIP model with its probability); a dry run says its
outputs come from random weights, so nobody mistakes shapes for an answer.
Readable progress lines go to stdout; the last line is RESULT_MARKER + JSON for the gates.
Expected failures (bad spec, unavailable device, unsupported model) print one `error: ...`
line; failures inside model code keep their full traceback on stderr for the healer, and both
still end with a RESULT line with ok=false. Exit 0 only for a finite run on the requested device.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import traceback
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NoReturn

from .errors import RuntimeDiagnosis, SpecError
from .phases import process_started
from .result import emit_result

TRUE_VALUES = ("1", "true", "yes", "on")
GENERATED_TOKENS = 4  # generative families (VLMs) show a short greedy continuation
DEFAULT_PROMPT = "The capital of France is"  # a causal LM continues this unless --text is given
DEFAULT_TEXT = "This film was a delight from start to finish."  # other text families read this
# An embedder compares the first with the second (related) and the third (unrelated) sentence.
SENTENCES = (
    "A man is playing a guitar.",
    "Someone is playing a musical instrument.",
    "The stock market fell sharply today.",
)
IMAGE_ANSWERS = ("image_text_to_text", "zero_shot_image_classification")  # families that answer --image in words
RANDOM_WEIGHTS_NOTE = (
    "these outputs come from random weights (initialised from the config), "
    "not from the trained model: they show the package runs, not what the model answers"
)


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # report like every other bad input, with a RESULT line
        raise SpecError(f"bad arguments: {message}")


def _given(text: str) -> str:
    """A --text / --image / --audio given empty (an unset shell variable) is a mistake, not a request
    for the default input: refused, so the run never answers for an input nobody asked about."""
    if not text.strip():
        raise argparse.ArgumentTypeError(f"expected a non-empty value, got {text!r}")
    return text


def _positive_int(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return int(text)


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    parser = _Parser(prog="demo.py", description="Run the adapted model once (npu -> cuda -> cpu).")
    parser.add_argument("--device", default="auto", choices=("auto", "npu", "cuda", "cpu"))
    parser.add_argument("--dry-run", action="store_true", help="weights from the config; also DRY_RUN=1")
    parser.add_argument("--dtype", default=None, help="override the spec's dtype (float32, bfloat16, float16)")
    parser.add_argument(
        "--allow-fallback", action="store_true", help="run elsewhere if the device is missing, and report it"
    )
    parser.add_argument("--spec", default="adaptation.json", help="adaptation spec (default ./adaptation.json)")
    parser.add_argument(
        "--text",
        type=_given,
        help="run on this text, through the model's own tokenizer (text families; a VLM's prompt with --image)",
    )
    parser.add_argument(
        "--image", type=_given, metavar="PATH", help="run on this image, through the model's image processor"
    )
    parser.add_argument(
        "--labels",
        metavar="TEXTS",
        help='zero-shot image classification: candidate texts, comma-separated ("a cat,a dog"), with --image',
    )
    parser.add_argument(
        "--audio", type=_given, metavar="WAV", help="run on this 16-bit PCM WAV, through the model's feature extractor"
    )
    parser.add_argument(
        "--max-new-tokens", type=_positive_int, default=8, help="tokens a causal LM generates for its answer"
    )
    args = parser.parse_args(list(argv))
    args.dry_run = args.dry_run or os.environ.get("DRY_RUN", "").strip().lower() in TRUE_VALUES
    return args


def _versions() -> dict[str, str | None]:
    versions: dict[str, str | None] = {"torch": None, "transformers": None, "torch_npu": None}
    for name in versions:
        module = sys.modules.get(name)
        versions[name] = getattr(module, "__version__", None) if module else None
    return versions


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    message = text[0] if text else ""
    return message if isinstance(exc, RuntimeDiagnosis) else f"{type(exc).__name__}: {message}".rstrip(": ")


def _run(args: argparse.Namespace, result: dict[str, Any]) -> None:
    """Fill `result` step by step, so a failure still reports everything learned before it."""
    from .spec import load_spec

    spec = load_spec(Path(args.spec))
    result.update(
        model_id=spec.model_id, task_family=spec.task_family, mode="dry_run" if args.dry_run else "pretrained"
    )
    print(f"model: {spec.model_id} ({spec.model_class}, task family {spec.task_family})", flush=True)

    import torch

    from .device import device_env, host_peak_rss, peak_memory, reset_peak_memory, select_device, synchronize
    from .families import get_family
    from .loading import load_model, resolve_dtype

    family = get_family(spec.task_family)
    dtype_name = args.dtype or spec.dtype_fallback or spec.dtype_target
    dtype = resolve_dtype(dtype_name)
    result.update(dtype=dtype_name, versions=_versions())
    if spec.dtype_fallback and not args.dtype:
        print(f"dtype: {dtype_name} (fallback from {spec.dtype_target}, set in the spec)", flush=True)

    device = select_device(args.device, allow_fallback=args.allow_fallback)
    result.update(
        device_used=device.kind,
        device_name=device.name,
        fallback=device.fallback,
        fallback_reason=device.fallback_reason,
        device_env=device_env(),
        versions=_versions(),
    )
    note = f" (FALLBACK: {device.fallback_reason})" if device.fallback else ""
    print(
        f"device: requested {args.device}, using {device.torch_device} [{device.name}], dtype {dtype_name}{note}",
        flush=True,
    )
    for skipped in device.skipped if args.device == "auto" else ():
        print(f"  not used: {skipped}", flush=True)

    print(
        f"loading ({'dry run: weights initialised from the config' if args.dry_run else 'real weights'})...", flush=True
    )
    reset_peak_memory(device)
    loaded = load_model(spec, args.dry_run, device, dtype)
    result.update(loaded.evidence())
    print(f"loaded {type(loaded.model).__name__}: {loaded.origin}", flush=True)
    for line in loaded.notes:
        print(f"  note: {line}", flush=True)
    if loaded.layers_total is not None:
        reduced = f" (depth reduced: {loaded.stacks})" if loaded.depth_reduced else ""
        print(f"layers: {loaded.layers_built} of {loaded.layers_total} built{reduced}", flush=True)

    if args.text or args.image or args.audio or args.labels is not None:
        from .preprocess import real_inputs

        inputs = real_inputs(spec, loaded.model, args.text, args.image, args.audio, args.labels)
        source = "the model's own preprocessor"
    else:
        inputs = family.build_inputs(loaded.model, loaded.config, spec.recipe, spec.recipe.seed)
        source = f"seeded synthetic (seed {spec.recipe.seed})"
        path = family.describe_inputs(loaded.config)
        if path:
            source += f"; {path}"
    result["inputs"] = source
    print(f"inputs ({source}): " + ", ".join(f"{k} {list(v.shape)}" for k, v in inputs.items()), flush=True)
    from .inputs import forward_flags
    from .vision_tasks import generate_ids

    on_device = {k: v.to(device.torch_device) for k, v in inputs.items()}
    with torch.inference_mode():
        raw = loaded.model(**on_device, **forward_flags(loaded.model))
        outputs = family.named_outputs(
            raw, on_device, spec.sentence_transformers_pooling, spec.sentence_transformers_normalize, loaded.config
        )
        generated = generate_ids(loaded.model, on_device, GENERATED_TOKENS) if family.generates else None
    synchronize(device)

    from .outputs import describe

    described = describe(outputs)
    result.update(outputs=described, device_peak_memory_bytes=peak_memory(device), host_peak_rss_bytes=host_peak_rss())
    summary = family.summary(outputs, loaded.config)
    print(f"result: {summary}", flush=True)
    if generated is not None:
        result["generated_ids"] = generated.tolist()
        print(f"generated (greedy, {GENERATED_TOKENS} tokens) for sample 0: {generated[0].tolist()}", flush=True)
    for name, stats in described.items():
        print(f"  {name}: shape {stats['shape']} {stats['dtype']} finite={stats['finite']}", flush=True)
    bad = [name for name, stats in described.items() if not stats["finite"]]
    if bad:
        raise RuntimeDiagnosis(f"non-finite values (nan/inf) in outputs: {', '.join(bad)}")
    if args.image and spec.task_family in IMAGE_ANSWERS:
        result["answer"] = _image_answer(args, spec, loaded, on_device, outputs)
    else:
        result["answer"] = _answer(args, spec, loaded, family, device, summary if args.text else None)
    result["ok"] = True


def _random_weights() -> dict[str, Any]:
    print(f"note: {RANDOM_WEIGHTS_NOTE}", flush=True)
    return {"kind": "random_weights", "text": RANDOM_WEIGHTS_NOTE}


def _image_answer(
    args: argparse.Namespace, spec: Any, loaded: Any, inputs: dict[str, Any], outputs: dict[str, Any]
) -> dict[str, Any]:
    """A VLM's generated text about --image, or the best of --labels for a CLIP/SigLIP model, from
    the run above on the real inputs; random weights never pass for an answer."""
    if loaded.mode != "pretrained":
        return _random_weights()
    if spec.task_family == "zero_shot_image_classification":
        from .preprocess import parse_labels
        from .vision_tasks import label_probabilities

        labels = parse_labels(args.labels)
        probs = label_probabilities(outputs["logits_per_image"][0], loaded.config).tolist()
        best = max(range(len(labels)), key=probs.__getitem__)
        shown = ", ".join(f"{label!r} {p:.4f}" for label, p in zip(labels, probs))
        print(f"answer: {args.image} is {labels[best]!r} (probability {probs[best]:.4f}; {shown})", flush=True)
        return {
            "kind": "zero_shot_label",
            "image": args.image,
            "label": labels[best],
            "probability": round(probs[best], 6),
            "labels": labels,
            "probabilities": [round(p, 6) for p in probs],
        }
    import torch

    from .preprocess import VLM_PROMPT, load_tokenizer

    tokenizer, prompt = load_tokenizer(spec), args.text or VLM_PROMPT
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    with torch.inference_mode():
        out = loaded.model.generate(**inputs, max_new_tokens=args.max_new_tokens, do_sample=False, pad_token_id=pad)
    new = out[0, inputs["input_ids"].shape[1] :].tolist()
    text = tokenizer.decode(new, skip_special_tokens=True)
    print(f"answer: on {args.image} {prompt!r} -> {text!r} ({len(new)} new tokens, greedy)", flush=True)
    return {"kind": "generation", "image": args.image, "prompt": prompt, "text": text, "token_ids": new}


def _answer(
    args: argparse.Namespace, spec: Any, loaded: Any, family: Any, device: Any, text_summary: str | None
) -> dict[str, Any] | None:
    """The model's answer in words, for a person reading the run; None when there is none to give
    (no tokenizer, an image or audio family without a worded answer). Random weights never pass
    for an answer. `text_summary`: the family's summary of the run above when it read --text."""
    if loaded.mode != "pretrained":
        return _random_weights()
    from .preprocess import TEXT_FAMILIES, load_tokenizer

    if spec.task_family not in TEXT_FAMILIES or args.image or args.audio:
        return None
    try:
        tokenizer = load_tokenizer(spec)
    except (RuntimeDiagnosis, ImportError) as exc:  # no tokenizer, or one needing a missing library
        print(f"answer: none ({_one_line(exc)})", flush=True)
        return None
    if spec.task_family == "causal_lm":
        return _generated(args.text or DEFAULT_PROMPT, tokenizer, loaded.model, device, args.max_new_tokens)
    if family.pools:
        return _similarity((args.text or SENTENCES[0],) + SENTENCES[1:], spec, loaded.model, family, device)
    return _summarised(args.text or DEFAULT_TEXT, spec, loaded, family, device, text_summary)


def _generated(prompt: str, tokenizer: Any, model: Any, device: Any, new_tokens: int) -> dict[str, Any]:
    """Greedy continuation of `prompt` with the KV cache, decoded by the model's tokenizer."""
    import torch

    encoded = tokenizer(prompt, return_tensors="pt")
    inputs = {k: v.to(device.torch_device) for k, v in encoded.items() if k in ("input_ids", "attention_mask")}
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    with torch.inference_mode():
        out = model.generate(**inputs, max_new_tokens=new_tokens, do_sample=False, pad_token_id=pad)
    new = out[0, inputs["input_ids"].shape[1] :].tolist()
    text = tokenizer.decode(new, skip_special_tokens=True)
    print(f"answer: {prompt!r} -> {text!r} ({len(new)} new tokens, greedy)", flush=True)
    return {"kind": "generation", "prompt": prompt, "text": text, "token_ids": new}


def _similarity(sentences: Sequence[str], spec: Any, model: Any, family: Any, device: Any) -> dict[str, Any]:
    """Cosine similarity of the first sentence's embedding with each other one's (the package's
    own pooling and normalisation; mean pooling when the spec names none)."""
    import torch

    from .inputs import Signature, forward_flags
    from .preprocess import tokenize

    accepted = Signature.of(model).accepted
    batch = {k: v.to(device.torch_device) for k, v in tokenize(spec, sentences).items() if k in accepted}
    with torch.inference_mode():
        named = family.named_outputs(
            model(**batch, **forward_flags(model)),
            batch,
            spec.sentence_transformers_pooling or "mean",
            spec.sentence_transformers_normalize,
        )
    if "sentence_embedding" not in named:
        raise RuntimeDiagnosis("the model gave no last_hidden_state to pool into sentence embeddings")
    embeddings = named["sentence_embedding"].float()
    scores = [
        round(float(torch.nn.functional.cosine_similarity(embeddings[0], other, dim=0)), 4) for other in embeddings[1:]
    ]
    pairs = "; ".join(f"vs {s!r}: {c:.4f}" for s, c in zip(sentences[1:], scores))
    print(f"answer: similarity of {sentences[0]!r} {pairs}", flush=True)
    return {"kind": "similarity", "sentences": list(sentences), "cosine": scores}


def _summarised(text: str, spec: Any, loaded: Any, family: Any, device: Any, summary: str | None) -> dict[str, Any]:
    """The family's own summary of the model's outputs on real text (a classifier: its label name);
    the run above gave it already when it read --text, else the default text is read now."""
    if summary is None:
        import torch

        from .inputs import forward_flags
        from .preprocess import real_inputs

        inputs = {k: v.to(device.torch_device) for k, v in real_inputs(spec, loaded.model, text=text).items()}
        with torch.inference_mode():
            outputs = family.named_outputs(loaded.model(**inputs, **forward_flags(loaded.model)), inputs)
        summary = family.summary(outputs, loaded.config)
    print(f"answer: on {text!r}: {summary}", flush=True)
    return {"kind": "summary", "input": text, "text": summary}


def main(argv: Sequence[str]) -> int:
    process_started()
    started = time.monotonic()
    result: dict[str, Any] = {
        "ok": False,
        "model_id": None,
        "task_family": None,
        "mode": None,
        "device_requested": None,
        "device_used": None,
        "device_name": None,
        "fallback": False,
        "fallback_reason": None,
        "dtype": None,
        "layers_built": None,
        "layers_total": None,
        "depth_reduced": False,
        "sharding": None,
        "proxy": None,
        "outputs": {},
        "duration_s": None,
        "versions": _versions(),
        "error": None,
        "error_kind": None,
    }
    try:
        args = parse_args(argv)
        result["device_requested"] = args.device
        _run(args, result)
    except RuntimeDiagnosis as exc:
        result["error"] = _one_line(exc)
        result["error_kind"] = exc.kind
        print(f"error: {result['error']}", file=sys.stderr, flush=True)
    except Exception as exc:  # model code failed: the traceback is the healer's evidence
        traceback.print_exc()
        result["error"] = _one_line(exc)
        result["error_kind"] = "exception"
        print(f"error: {result['error']}", file=sys.stderr, flush=True)
    result["duration_s"] = round(time.monotonic() - started, 3)
    result["versions"] = _versions()
    status = "ok" if result["ok"] else "FAILED"
    print(f"{status} in {result['duration_s']:.1f} s", flush=True)
    emit_result(result)
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
