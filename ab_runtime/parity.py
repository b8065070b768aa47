"""Library parity: the package's outputs equal what the model's own library gives for the same text.

    python -m ab_runtime.parity [--spec adaptation.json]

A package that runs is not yet a package that answers like the original: a missing Normalize
module or another pooling gives embeddings that look fine and are wrong. So, when the model's
own library is installed in the package's environment, this runs both on the same sentences, on
CPU in float32 with real weights, and compares:

- sentence-transformers models (modules.json): `SentenceTransformer.encode` (every module of
  modules.json) vs the package's `sentence_embedding`;
- sequence_classification: transformers' `text-classification` pipeline (raw scores) vs logits;
- feature_extraction without modules.json: the `feature-extraction` pipeline vs last_hidden_state.

The last line is RESULT_MARKER + JSON: checked (false when the library is not installed or the
family has no library pipeline: nothing to compare, said why), ok, the worst figures and the
tolerance. Exit 0 when ok or not checked, 1 when the outputs differ or the run failed.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from .errors import RuntimeDiagnosis
from .result import emit_result

SENTENCES = (
    "A package must answer exactly like the model's own library.",
    "Ascend NPUs run PyTorch models through torch_npu.",
    "short",
)
# float32 on CPU, same weights, same tokens: only summation order differs.
FP32_MAX_ABS_ERR = 1e-4  # relative to the largest reference magnitude (at least 1)
FP32_MIN_COSINE = 0.99999


@dataclass
class Parity:
    checked: bool
    ok: bool
    library: str | None = None
    reason: str = ""
    inputs: int = 0
    max_abs_err: float | None = None
    min_cosine: float | None = None
    tolerance: dict[str, float] | None = None


def compare(package: Sequence[Any], library: Sequence[Any]) -> tuple[float, float]:
    """(max abs error scaled by the reference's magnitude, min cosine) over pairs of tensors."""
    import torch

    worst_err, worst_cos = 0.0, 1.0
    for ours, theirs in zip(package, library, strict=True):
        a, b = ours.detach().double().flatten().cpu(), theirs.detach().double().flatten().cpu()
        if a.shape != b.shape:
            raise RuntimeDiagnosis(f"shape differs: package {list(ours.shape)} vs library {list(theirs.shape)}")
        scale = max(1.0, float(b.abs().max()))
        worst_err = max(worst_err, float((a - b).abs().max()) / scale)
        worst_cos = min(worst_cos, float(torch.nn.functional.cosine_similarity(a, b, dim=0)))
    return worst_err, worst_cos


def _installed(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


def _package_outputs(spec: Any, texts: Sequence[str], batched: bool) -> list[dict[str, Any]]:
    """The package's named outputs for `texts` (one batch, or one call per text), CPU float32."""
    import torch

    from .device import select_device
    from .families import get_family
    from .inputs import Signature, forward_flags
    from .loading import load_model
    from .preprocess import tokenize

    loaded = load_model(spec, False, select_device("cpu"), torch.float32)
    family = get_family(spec.task_family)
    flags = forward_flags(loaded.model)
    out = []
    with torch.inference_mode():
        for group in [list(texts)] if batched else [[t] for t in texts]:
            inputs = tokenize(spec, group)
            accepted = {k: v for k, v in inputs.items() if k in Signature.of(loaded.model).accepted}
            out.append(
                family.named_outputs(
                    loaded.model(**accepted, **flags),
                    accepted,
                    spec.sentence_transformers_pooling,
                    spec.sentence_transformers_normalize,
                )
            )
    return out


def _sentence_transformers(spec: Any, ident: str) -> tuple[list[Any], list[Any]]:
    from sentence_transformers import SentenceTransformer

    library = SentenceTransformer(ident, device="cpu").encode(
        list(SENTENCES), batch_size=len(SENTENCES), convert_to_tensor=True
    )
    ours = _package_outputs(spec, SENTENCES, batched=True)[0]
    if "sentence_embedding" not in ours:
        raise RuntimeDiagnosis("the package produced no sentence_embedding (spec has no pooling)")
    return list(ours["sentence_embedding"]), list(library)


def _pipeline(task: str, output: str) -> Callable[[Any, str], tuple[list[Any], list[Any]]]:
    def run(spec: Any, ident: str) -> tuple[list[Any], list[Any]]:
        import torch
        from transformers import pipeline

        from .loading import dtype_kwarg

        pipe = pipeline(task, model=ident, device="cpu", **dtype_kwarg(torch.float32))
        ours = [o[output][0] for o in _package_outputs(spec, SENTENCES, batched=False)]
        theirs = []
        for text in SENTENCES:
            if task == "text-classification":
                scores = pipe(text, function_to_apply="none", top_k=None)
                by_label = {s["label"]: s["score"] for s in scores}
                labels = [pipe.model.config.id2label[i] for i in range(len(by_label))]
                theirs.append(torch.tensor([by_label[label] for label in labels]))
            else:
                theirs.append(pipe(text, return_tensors=True)[0])
        return ours, theirs

    return run


def check(spec: Any) -> Parity:
    from .loading import source_kwargs

    ident, _, _ = source_kwargs(spec)
    tolerance = {"max_abs_err_scaled": FP32_MAX_ABS_ERR, "cosine_min": FP32_MIN_COSINE}
    runner: Callable[[Any, str], tuple[list[Any], list[Any]]]
    if spec.sentence_transformers_pooling:
        library, runner = "sentence-transformers", _sentence_transformers
        if not _installed("sentence_transformers"):
            return Parity(False, True, library, "sentence-transformers is not installed in this environment")
    elif spec.task_family == "sequence_classification":
        library, runner = "transformers text-classification pipeline", _pipeline("text-classification", "logits")
    elif spec.task_family == "feature_extraction":
        library, runner = (
            "transformers feature-extraction pipeline",
            _pipeline("feature-extraction", "last_hidden_state"),
        )
    else:
        return Parity(False, True, None, f"no library pipeline is compared for task family {spec.task_family}")
    if not spec.has_weights:
        return Parity(False, True, library, "the model has no weights to compare")
    ours, theirs = runner(spec, ident)
    err, cos = compare(ours, theirs)
    ok = err <= FP32_MAX_ABS_ERR and cos >= FP32_MIN_COSINE
    reason = (
        "equal within float32 tolerance"
        if ok
        else (
            f"outputs differ from {library}: max abs err (scaled) {err:.3g} > {FP32_MAX_ABS_ERR:g}"
            if err > FP32_MAX_ABS_ERR
            else f"outputs differ from {library}: cosine {cos:.7f} < {FP32_MIN_COSINE}"
        )
    )
    return Parity(True, ok, library, reason, len(ours), err, cos, tolerance)


def main(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m ab_runtime.parity", description=__doc__.splitlines()[0])
    parser.add_argument("--spec", default="adaptation.json")
    args = parser.parse_args(list(argv))
    try:
        from .spec import load_spec

        result = check(load_spec(Path(args.spec)))
    except RuntimeDiagnosis as exc:
        result = Parity(True, False, reason=str(exc).splitlines()[0])
    except Exception as exc:  # the library or the model failed: a parity failure, said in one line
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        result = Parity(True, False, reason=f"{type(exc).__name__}: {first}".rstrip(": "))
    print(f"parity: {result.library or '-'}: {result.reason}", flush=True)
    emit_result(asdict(result))
    return 0 if result.ok else 1


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
