"""The one reader of a quantized checkpoint: its format told by its files (checkpoint.py says what
each format is)."""

from __future__ import annotations

from pathlib import Path

from .ascend_format import DESCRIPTION_FILE, read_checkpoint
from .checkpoint import CheckpointError, QuantCheckpoint
from .ct_format import CONFIG_FILE, read_ct_checkpoint


def read_quantized(directory: Path) -> QuantCheckpoint:
    """The checkpoint in `directory`, read by its format's reader (ascendv1 or compressed-tensors)."""
    if (directory / DESCRIPTION_FILE).is_file():
        return read_checkpoint(directory)
    if (directory / CONFIG_FILE).is_file():
        return read_ct_checkpoint(directory)
    raise CheckpointError(
        f"{directory}: neither {DESCRIPTION_FILE} (msModelSlim ascendv1) nor {CONFIG_FILE} (compressed-tensors)"
    )
