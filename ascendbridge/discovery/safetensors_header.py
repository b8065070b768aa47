"""Parameter counts and dtypes from safetensors headers, without torch and without the weights.

A safetensors file starts with an 8-byte little-endian header length and a JSON header that
lists every tensor's dtype, shape and byte range. Reading only that header is how discovery
learns the size of a 70B model from a few kilobytes. The byte ranges are checked against the
file size so a truncated download is caught here, not halfway through a model run.
"""

from __future__ import annotations

import json
import math
import struct
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ascendbridge import capped_read
from ascendbridge.discovery.errors import DiscoveryError

MAX_HEADER_BYTES = 100 * 1024 * 1024  # the safetensors reference implementation's own limit
INDEX_FILE = "model.safetensors.index.json"
SINGLE_FILE = "model.safetensors"

# Bits per element of every dtype the safetensors format defines.
DTYPE_BITS: dict[str, int] = {
    "F64": 64,
    "F32": 32,
    "F16": 16,
    "BF16": 16,
    "F8_E4M3": 8,
    "F8_E5M2": 8,
    "F8_E8M0": 8,
    "F6_E2M3": 6,
    "F6_E3M2": 6,
    "F4": 4,
    "I64": 64,
    "I32": 32,
    "I16": 16,
    "I8": 8,
    "U64": 64,
    "U32": 32,
    "U16": 16,
    "U8": 8,
    "BOOL": 8,
    "C64": 64,
}
FLOAT_DTYPES = frozenset({"F64", "F32", "F16", "BF16", "F8_E4M3", "F8_E5M2", "F8_E8M0", "F6_E2M3", "F6_E3M2", "F4"})
# safetensors dtype -> the torch dtype name the rest of the pipeline uses.
TORCH_NAMES: dict[str, str] = {
    "F64": "float64",
    "F32": "float32",
    "F16": "float16",
    "BF16": "bfloat16",
    "F8_E4M3": "float8_e4m3fn",
    "F8_E5M2": "float8_e5m2",
    "F8_E8M0": "float8_e8m0fnu",
    "F6_E2M3": "float6_e2m3",
    "F6_E3M2": "float6_e3m2",
    "F4": "float4_e2m1",
    "I64": "int64",
    "I32": "int32",
    "I16": "int16",
    "I8": "int8",
    "U64": "uint64",
    "U32": "uint32",
    "U16": "uint16",
    "U8": "uint8",
    "BOOL": "bool",
    "C64": "complex64",
}


@dataclass
class WeightsSummary:
    """What the headers say. Parameters are floating-point tensors; integer tensors (e.g. BERT's
    position_ids) are buffers, counted apart, as transformers' num_parameters() does."""

    parameter_count: int = 0
    buffer_elements: int = 0
    elements_by_dtype: dict[str, int] = field(default_factory=dict)
    data_bytes: int = 0
    tensor_count: int = 0
    files: list[str] = field(default_factory=list)

    @property
    def dtype(self) -> str | None:
        """The floating dtype holding most parameters, as a torch dtype name."""
        floats = {k: v for k, v in self.elements_by_dtype.items() if k in FLOAT_DTYPES}
        if not floats:
            return None
        return TORCH_NAMES[max(floats, key=lambda k: floats[k])]

    @property
    def parameters_by_dtype(self) -> dict[str, int]:
        return {TORCH_NAMES[k]: v for k, v in sorted(self.elements_by_dtype.items()) if k in FLOAT_DTYPES}


def tensor_bytes(dtype: str, shape: list[int]) -> int:
    return math.ceil(math.prod(shape) * DTYPE_BITS[dtype] / 8)


def read_header(path: Path) -> dict[str, Any]:
    """Read and validate one file's header; raise DiscoveryError naming the file and the defect."""
    name = path.name
    try:
        size = path.stat().st_size
        with path.open("rb") as fh:
            head = fh.read(8)
            if len(head) < 8:
                raise DiscoveryError(
                    f"{name}: truncated safetensors file ({size} bytes, no header)", "corrupt_safetensors"
                )
            (length,) = struct.unpack("<Q", head)
            if length == 0 or length > MAX_HEADER_BYTES or 8 + length > size:
                raise DiscoveryError(
                    f"{name}: truncated or corrupt safetensors header (declares {length} header bytes, "
                    f"file has {size} bytes)",
                    "corrupt_safetensors",
                )
            raw = fh.read(length)
    except OSError as exc:
        raise DiscoveryError(f"{name}: cannot read ({exc.strerror or exc})", "corrupt_safetensors") from None
    try:
        header = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise DiscoveryError(f"{name}: corrupt safetensors header (not valid JSON)", "corrupt_safetensors") from None
    check_header(header, name)
    payload = size - 8 - length
    end = max((v["data_offsets"][1] for k, v in header.items() if k != "__metadata__"), default=0)
    if end != payload:
        raise DiscoveryError(
            f"{name}: truncated safetensors file (header describes {end} data bytes, file holds {payload})",
            "corrupt_safetensors",
        )
    return header


def check_header(header: Any, name: str) -> None:
    """Every entry must be a tensor with a known dtype, a shape and a byte range that fits it."""
    if not isinstance(header, dict):
        raise DiscoveryError(f"{name}: corrupt safetensors header (not a JSON object)", "corrupt_safetensors")
    for key, entry in header.items():
        if key == "__metadata__":
            continue
        try:
            dtype, shape, (start, stop) = entry["dtype"], entry["shape"], entry["data_offsets"]
            ok = (
                dtype in DTYPE_BITS
                and isinstance(shape, list)
                and all(isinstance(d, int) and d >= 0 for d in shape)
                and isinstance(start, int)
                and isinstance(stop, int)
                and 0 <= start <= stop
                and stop - start == tensor_bytes(dtype, shape)
            )
        except (KeyError, TypeError, ValueError):
            ok = False
        if not ok:
            raise DiscoveryError(
                f"{name}: corrupt safetensors header (bad entry for tensor '{key}')", "corrupt_safetensors"
            )


def summarize(headers: Iterable[tuple[str, dict[str, Any]]]) -> WeightsSummary:
    """Add up (file name, header) pairs; the caller has validated the headers."""
    out = WeightsSummary()
    for fname, header in headers:
        out.files.append(fname)
        for key, entry in header.items():
            if key == "__metadata__":
                continue
            dtype, shape = entry["dtype"], entry["shape"]
            n = math.prod(shape)
            out.tensor_count += 1
            out.elements_by_dtype[dtype] = out.elements_by_dtype.get(dtype, 0) + n
            out.data_bytes += tensor_bytes(dtype, shape)
            if dtype in FLOAT_DTYPES:
                out.parameter_count += n
            else:
                out.buffer_elements += n
    return out


def shard_names(index_path: Path) -> list[str]:
    """The shard files a sharded checkpoint's index lists, in a stable order."""
    try:
        index = json.loads(capped_read.read_text(index_path, capped_read.CONFIG_MAX_BYTES))
        weight_map = index["weight_map"]
        names = sorted(set(weight_map.values()))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, KeyError, TypeError, AttributeError):
        raise DiscoveryError(
            f"{index_path.name}: corrupt safetensors index (no readable weight_map)", "corrupt_safetensors"
        ) from None
    for n in names:
        if not isinstance(n, str) or "/" in n or n.startswith("."):
            raise DiscoveryError(f"{index_path.name}: bad shard name {n!r}", "corrupt_safetensors")
    return names


def local_weight_files(directory: Path) -> list[str]:
    """The safetensors files a model directory loads from: the index's shards, else the single
    file, else every top-level *.safetensors (non-standard names)."""
    if (directory / INDEX_FILE).is_file():
        names = shard_names(directory / INDEX_FILE)
        missing = [n for n in names if not (directory / n).is_file()]
        if missing:
            raise DiscoveryError(
                f"{INDEX_FILE} lists {len(missing)} missing shard(s), e.g. {missing[0]}", "corrupt_safetensors"
            )
        return names
    if (directory / SINGLE_FILE).is_file():
        return [SINGLE_FILE]
    return sorted(p.name for p in directory.glob("*.safetensors") if p.is_file())


def summarize_directory(directory: Path) -> WeightsSummary | None:
    """Headers of a local directory's safetensors weights, or None when it has none."""
    files = local_weight_files(directory)
    if not files:
        return None
    return summarize((f, read_header(directory / f)) for f in files)
