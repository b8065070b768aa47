"""Whether a package's model has real weights to load: healing, benchmark, optimization and the
business benchmark all decide between a real-weights run and a dry run with it."""

from __future__ import annotations

from pathlib import Path

from ascendbridge.package.spec import AdaptationSpec

_WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".ckpt", ".gguf")


def weights_available(spec: AdaptationSpec) -> tuple[bool, str]:
    """Whether a real-weights run can be attempted, with the reason either way."""
    model = spec.model
    if not model.has_weights:
        return False, "config-only model (no weights to load)"
    if model.source == "huggingface":
        return True, "weights from the Hugging Face Hub (or its local cache)"
    root = Path(model.path or "")
    if not model.path or not root.is_dir():
        return False, f"model path {model.path!r} is not a directory"
    found = next((p for p in root.rglob("*") if p.suffix in _WEIGHT_SUFFIXES and p.is_file()), None)
    if found is None:
        return False, f"no weight files under {root}"
    return True, f"weights at {found.parent}"
