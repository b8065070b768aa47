"""Parameter counts and dtypes from safetensors headers (no torch), and broken headers."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest

from ascendbridge.discovery.errors import DiscoveryError
from ascendbridge.discovery.safetensors_header import read_header, summarize, summarize_directory


def test_real_minilm_header(minilm_dir: Path) -> None:
    summary = summarize_directory(minilm_dir)
    assert summary is not None
    # Computed from the real header: 22,713,216 float32 parameters plus BERT's int64
    # position_ids buffer (1 x 512), which is not a parameter.
    assert summary.parameter_count == 22_713_216
    assert summary.buffer_elements == 512
    assert summary.dtype == "float32"
    assert summary.tensor_count == 104
    assert summary.data_bytes + 8 + 11408 == (minilm_dir / "model.safetensors").stat().st_size


def test_mixed_dtypes_pick_the_dominant_float(tmp_path: Path, safetensors_writer) -> None:
    path = tmp_path / "model.safetensors"
    safetensors_writer(path, {"w": ("BF16", [64, 32]), "norm": ("F32", [32]), "ids": ("I64", [1, 8])})
    summary = summarize([("model.safetensors", read_header(path))])
    assert summary.parameter_count == 64 * 32 + 32
    assert summary.parameters_by_dtype == {"bfloat16": 2048, "float32": 32}
    assert summary.dtype == "bfloat16"
    assert summary.buffer_elements == 8


def test_sharded_checkpoint_sums_every_shard(tmp_path: Path, safetensors_writer) -> None:
    safetensors_writer(tmp_path / "model-00001-of-00002.safetensors", {"a": ("F16", [10, 10])})
    safetensors_writer(tmp_path / "model-00002-of-00002.safetensors", {"b": ("F16", [5, 4]), "c": ("F16", [3])})
    index = {
        "metadata": {},
        "weight_map": {
            "a": "model-00001-of-00002.safetensors",
            "b": "model-00002-of-00002.safetensors",
            "c": "model-00002-of-00002.safetensors",
        },
    }
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps(index))
    summary = summarize_directory(tmp_path)
    assert summary is not None
    assert summary.parameter_count == 100 + 20 + 3
    assert summary.files == ["model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"]


def test_missing_shard_is_an_error(tmp_path: Path, safetensors_writer) -> None:
    safetensors_writer(tmp_path / "model-00001-of-00002.safetensors", {"a": ("F16", [10])})
    index = {"weight_map": {"a": "model-00001-of-00002.safetensors", "b": "model-00002-of-00002.safetensors"}}
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps(index))
    with pytest.raises(DiscoveryError, match="missing shard"):
        summarize_directory(tmp_path)


@pytest.mark.parametrize(
    "mutate, message",
    [
        (lambda raw: raw[:5], "no header"),  # shorter than the 8-byte length prefix
        (lambda raw: struct.pack("<Q", 10**12) + raw[8:], "truncated or corrupt safetensors header"),
        (lambda raw: raw[: len(raw) // 2], "truncated"),  # cut inside the data
        (lambda raw: raw[:8] + b"{not json" + raw[17:], "not valid JSON"),
        (lambda raw: raw[:-4], "header describes"),  # data shorter than the header claims
    ],
    ids=["tiny-file", "huge-length", "cut-in-half", "garbage-json", "short-data"],
)
def test_broken_files_give_one_clear_error(tmp_path: Path, safetensors_writer, mutate, message) -> None:
    good = tmp_path / "good.safetensors"
    safetensors_writer(good, {"w": ("F32", [16, 16])})
    bad = tmp_path / "model.safetensors"
    bad.write_bytes(mutate(good.read_bytes()))
    with pytest.raises(DiscoveryError, match=message) as info:
        read_header(bad)
    assert info.value.rule == "corrupt_safetensors"
    assert "\n" not in str(info.value)


def test_inconsistent_entry_is_rejected(tmp_path: Path) -> None:
    header = json.dumps({"w": {"dtype": "F32", "shape": [4, 4], "data_offsets": [0, 10]}}).encode()
    path = tmp_path / "model.safetensors"
    path.write_bytes(struct.pack("<Q", len(header)) + header + b"\0" * 10)
    with pytest.raises(DiscoveryError, match="bad entry for tensor 'w'"):
        read_header(path)
