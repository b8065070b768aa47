"""What people and the serving stage see of a package's quantized checkpoints (quantization/,
written by the quantization stage): its evidence file and the checkpoints it accepted, read from
the files, for the dashboard and for the serving stage's Ascend artefacts."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ascendbridge import capped_read

QUANT_DIR = "quantization"  # in the adaptation directory
QUANT_EVIDENCE = f"{QUANT_DIR}/quant_evidence.json"
QUANT_MODEL_DIR = f"{QUANT_DIR}/model"  # the float model the checkpoints were made from


def quant_evidence(adaptation_dir: Path) -> dict[str, Any] | None:
    """The quantization stage's evidence file (QUANT_EVIDENCE), or None without one (or an unreadable one)."""
    return capped_read.json_object(Path(adaptation_dir) / QUANT_EVIDENCE, capped_read.EVIDENCE_MAX_BYTES)


ASCEND_FORMAT = "ascendv1"  # msModelSlim's, loaded by vLLM-Ascend with --quantization ascend
CT_FORMAT = "compressed-tensors"  # LLM-Compressor's, loaded by vLLM (the CPU engine included)


def accepted_checkpoints(adaptation_dir: Path, fmt: str = ASCEND_FORMAT) -> list[tuple[str, str]]:
    """(scheme, checkpoint directory relative to the package) of every accepted scheme of format
    `fmt` (a record without one is ascendv1, as every record was before compressed-tensors) whose
    checkpoint lies inside the package's quantization/ folder, in the evidence's order."""
    evidence = quant_evidence(adaptation_dir) or {}
    schemes = evidence.get("schemes")
    usable = evidence.get("usable")
    if not isinstance(schemes, dict) or not isinstance(usable, list):
        return []
    root = (Path(adaptation_dir) / QUANT_DIR).resolve()
    accepted = []
    for scheme in usable:
        record = schemes.get(scheme) if isinstance(scheme, str) else None
        if not isinstance(record, dict) or record.get("verdict") != "accepted":
            continue
        if record.get("format", ASCEND_FORMAT) != fmt:
            continue
        checkpoint = record.get("checkpoint")
        if not isinstance(checkpoint, str):
            continue
        if (Path(adaptation_dir) / checkpoint).resolve().is_relative_to(root):
            accepted.append((scheme, checkpoint))
    return accepted
