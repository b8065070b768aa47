"""The Hugging Face Hub stand-in for tests: the Hub cannot be reached from here, so the Hub code
paths (discovery's model source, training's `hf:` datasets) are tested against this real HTTP
server, driven by the real huggingface_hub and datasets clients. It speaks the small part of the
Hub's protocol they use: model info and listing, dataset info and tree listings, resolve URLs with HEAD + ranged GET, and the Hub's X-Error-Code headers. It records every request
so tests can prove what was (not) downloaded.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import struct
import urllib.parse
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from tests.support.threaded import served_in_thread

LFS_SUFFIXES = (".safetensors", ".bin", ".gguf", ".parquet", ".arrow")  # stored in LFS: the Hub serves their sha256
API_RE = re.compile(r"^/api/(models|datasets)/([^/]+/[^/]+)(?:/(revision|tree)/([^/]+)(?:/(.*))?)?$")
RESOLVE_RE = re.compile(r"^/(datasets/)?([^/]+/[^/]+)/resolve/([^/]+)/(.+)$")


def _git_blob_id(data: bytes) -> str:
    """The git object id the Hub lists as a file's `oid`."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


@dataclass
class FakeHubRepo:
    directory: Path
    commit: str
    gated: bool = False
    # Listing fields (downloads, likes, pipeline_tag, library_name, tags, ...) and card overrides.
    listing: dict[str, Any] = field(default_factory=dict)
    card: dict[str, Any] = field(default_factory=dict)
    uid: str = ""  # the Hub's internal id (`_id`), the same under every name of the repo
    refs: tuple[str, ...] = ()  # branches and tags besides main, all at `commit`

    def files(self) -> dict[str, Path]:
        return {
            p.relative_to(self.directory).as_posix(): p
            for p in sorted(self.directory.rglob("*"))
            if p.is_file() and not p.name.startswith(".")
        }

    def has_revision(self, revision: str) -> bool:
        return revision in ("", "main", self.commit, *self.refs)

    def _sibling(self, name: str, path: Path, blobs: bool) -> dict[str, Any]:
        entry: dict[str, Any] = {"rfilename": name, "size": path.stat().st_size}
        if blobs and name.endswith(LFS_SUFFIXES):
            digest = hashlib.sha256(path.read_bytes()).hexdigest()
            entry["lfs"] = {"sha256": digest, "size": path.stat().st_size, "pointerSize": 134}
        return entry

    def _card(self) -> dict[str, Any]:
        from huggingface_hub.repocard import metadata_load

        readme = self.directory / "README.md"
        return {**((metadata_load(readme) or {}) if readme.is_file() else {}), **self.card}

    def info(self, repo_id: str, blobs: bool = False) -> dict[str, Any]:
        """A model's /api/models/{id} answer."""
        config = json.loads((self.directory / "config.json").read_text())
        counts: dict[str, int] = {}
        for name, path in self.files().items():
            if name.endswith(".safetensors"):
                raw = path.read_bytes()
                (n,) = struct.unpack("<Q", raw[:8])
                for key, t in json.loads(raw[8 : 8 + n]).items():
                    if key != "__metadata__":
                        counts[t["dtype"]] = counts.get(t["dtype"], 0) + math.prod(t["shape"])
        return {
            **self._common(repo_id, blobs),
            "modelId": repo_id,
            "config": {k: config[k] for k in ("architectures", "model_type", "auto_map") if k in config},
            **({"safetensors": {"parameters": counts, "total": sum(counts.values())}} if counts else {}),
            **self.listing,
        }

    def dataset_info(self, repo_id: str, blobs: bool = False) -> dict[str, Any]:
        """A dataset's /api/datasets/{id} answer."""
        return {**self._common(repo_id, blobs), "disabled": False, "tags": [], **self.listing}

    def _common(self, repo_id: str, blobs: bool) -> dict[str, Any]:
        return {
            "id": repo_id,
            "_id": self.uid or repo_id,
            "sha": self.commit,
            "private": False,
            "gated": "manual" if self.gated else False,
            "cardData": self._card(),
            "siblings": [self._sibling(n, p, blobs) for n, p in self.files().items()],
        }

    def tree_entry(self, name: str) -> dict[str, Any] | None:
        """One path's tree entry (a file or a folder), None when the repo has no such path."""
        path = self.directory / name
        if name and name in self.files():
            data = path.read_bytes()
            entry: dict[str, Any] = {"type": "file", "oid": _git_blob_id(data), "size": len(data), "path": name}
            if name.endswith(LFS_SUFFIXES):
                entry["lfs"] = {"oid": hashlib.sha256(data).hexdigest(), "size": len(data), "pointerSize": 134}
            return entry
        if name == "" or any(f.startswith(name.rstrip("/") + "/") for f in self.files()):
            return {"type": "directory", "oid": hashlib.sha1(name.encode()).hexdigest(), "size": 0, "path": name}
        return None

    def tree(self, folder: str, recursive: bool) -> list[dict[str, Any]] | None:
        """The /tree listing of folder: its children (all descendants when recursive), None when it is absent."""
        folder = folder.strip("/")
        if folder and (entry := self.tree_entry(folder)) is not None and entry["type"] != "directory":
            return None
        prefix = f"{folder}/" if folder else ""
        below = [f[len(prefix) :].split("/") for f in self.files() if f.startswith(prefix)]
        if folder and not below:
            return None
        names = {prefix + "/".join(parts[: i + 1]) for parts in below for i in range(len(parts) if recursive else 1)}
        return [e for n in sorted(names) if (e := self.tree_entry(n)) is not None]


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

    def _json(self, answer: Any, body: bool) -> None:
        self._reply(200, json.dumps(answer).encode(), {"Content-Type": "application/json"}, body)

    def _error(self, status: int, code: str, body: bool) -> None:
        self._reply(
            status,
            json.dumps({"error": code}).encode(),
            {"X-Error-Code": code, "X-Error-Message": code, "Content-Type": "application/json"},
            body,
        )

    def _serve(self, body: bool) -> None:
        url = urllib.parse.urlparse(self.path)
        path = urllib.parse.unquote(url.path)
        self.server.requests.append((self.command, path, self.headers.get("Range")))
        query = urllib.parse.parse_qs(url.query)
        if path == "/api/models":
            return self._json(self.server.listing(query), body)
        api = API_RE.match(path)
        if api:
            return self._api(api, query, body)
        match = RESOLVE_RE.match(path)
        if match is None:
            return self._error(404, "NotFound", body)
        repo = self.server.find("datasets" if match.group(1) else "models", match.group(2))
        if repo is None:
            return self._error(401, "RepoNotFound", body)
        if not repo.has_revision(match.group(3)):
            return self._error(404, "RevisionNotFound", body)
        if repo.gated and (self.server.refuse_tokens or not self.headers.get("Authorization")):
            return self._error(403, "GatedRepo", body)
        self._file(repo, match.group(4), body)

    def _api(self, api: re.Match[str], query: dict[str, list[str]], body: bool) -> None:
        kind, repo_id, action, revision, rest = api.groups()
        repo = self.server.find(kind, repo_id)
        if repo is None:
            return self._error(401, "RepoNotFound", body)
        if not repo.has_revision(revision or ""):
            return self._error(404, "RevisionNotFound", body)
        if action in (None, "revision"):
            blobs = query.get("blobs", [""])[-1].lower() == "true"
            canonical = self.server.canonical(kind, repo_id)
            return self._json(
                repo.info(canonical, blobs) if kind == "models" else repo.dataset_info(canonical, blobs), body
            )
        listing = repo.tree(rest or "", query.get("recursive", [""])[-1].lower() == "true")
        if listing is None:
            return self._error(404, "EntryNotFound", body)
        self._json(listing, body)

    def _file(self, repo: FakeHubRepo, name: str, body: bool) -> None:
        file = repo.files().get(name)
        if file is None:
            return self._error(404, "EntryNotFound", body)
        data = file.read_bytes()
        headers = {
            "X-Repo-Commit": repo.commit,
            "ETag": f'"{hashlib.sha256(data).hexdigest()}"',
            "Accept-Ranges": "bytes",
        }
        ranged = re.match(r"bytes=(\d+)-(\d*)", self.headers.get("Range") or "")
        if ranged:
            start = int(ranged.group(1))
            stop = int(ranged.group(2)) + 1 if ranged.group(2) else len(data)
            return self._reply(206, data[start:stop], headers, body)
        self._reply(200, data, headers, body)


class FakeHubServer(ThreadingHTTPServer):
    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), FakeHubHandler)
        self.repos: dict[str, FakeHubRepo] = {}  # models
        self.datasets: dict[str, FakeHubRepo] = {}
        self.requests: list[tuple[str, str, str | None]] = []
        self.refuse_tokens = False  # True: gated repos refuse every token (access not granted)
        self.aliases: dict[str, str] = {}

    def add(
        self,
        repo_id: str,
        directory: Path,
        commit: str,
        gated: bool = False,
        *,
        card: dict[str, Any] | None = None,
        **listing: Any,
    ) -> None:
        """A model repo; `listing` holds list fields (downloads=, likes=, pipeline_tag=, tags=, ...)."""
        self.repos[repo_id] = FakeHubRepo(directory, commit, gated, listing, card or {}, uid=f"uid-{repo_id}")

    def add_dataset(self, repo_id: str, directory: Path, commit: str, refs: tuple[str, ...] = ()) -> None:
        """A dataset repo: directory's files at commit, also reachable as main and as each of refs."""
        self.datasets[repo_id] = FakeHubRepo(directory, commit, uid=f"uid-{repo_id}", refs=refs)

    def rename(self, old: str, new: str) -> None:
        """The repo `new` was once called `old`: the Hub still answers under the old name."""
        self.aliases[old] = new

    def canonical(self, kind: str, repo_id: str) -> str:
        """Ids are case-insensitive on the Hub, and a renamed repo redirects to its new name."""
        repo_id = self.aliases.get(repo_id, repo_id)
        return next((r for r in self._store(kind) if r.casefold() == repo_id.casefold()), repo_id)

    def find(self, kind: str, repo_id: str) -> FakeHubRepo | None:
        return self._store(kind).get(self.canonical(kind, repo_id))

    def _store(self, kind: str) -> dict[str, FakeHubRepo]:
        return self.datasets if kind == "datasets" else self.repos

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

    def stop(self) -> None:
        self.shutdown()
        self.server_close()


@contextmanager
def serving() -> Iterator[FakeHubServer]:
    """A FakeHubServer answering on a thread of its own until the block ends."""
    with served_in_thread(FakeHubServer()) as server:
        yield server
