"""Render `adaptations/<name>/` from its spec: pyproject.toml, uv.lock, README.md, demo.py,
adaptation.json and a verbatim copy of the runtime package `ab_runtime/`.

Everything is a pure function of the spec and the torch source, and files are only rewritten
when their content changes, so re-rendering an unchanged spec leaves the directory untouched
(byte for byte, mtimes included) and `uv lock` only runs when pyproject.toml changed. The healer
fixes a model by editing the spec and calling `generate` again.
"""

from __future__ import annotations

import json
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import jinja2
from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename

from ab_runtime import accuracy_standard
from ab_runtime.fileops import write_bytes_atomic
from ascendbridge.config import RUNTIME_DIR, RUNTIME_NAME, TorchSource
from ascendbridge.config import torch_source as configured_torch_source
from ascendbridge.package.spec import SPEC_FILE, AdaptationSpec
from ascendbridge.package.uv_env import PROFILES, lock
from ascendbridge.templating import strict_environment
from ascendbridge.workers.process import CommandResult

PACKAGE_DIR = Path(__file__).resolve().parent
TEMPLATES_DIR = PACKAGE_DIR / "templates"

# Every adaptation needs these besides transformers (spec.transformers_requirement) and torch; peft
# for LoRA training (ab_runtime/train/lora.py): the training stage syncs the package's own lock.
BASE_DEPENDENCIES: tuple[str, ...] = ("safetensors>=0.4", "numpy>=1.26", "huggingface_hub>=0.26", "peft>=0.18")
# A model whose discovery plan spreads it over several devices loads through transformers' device_map,
# which needs accelerate (ab_runtime/sharding.py).
SHARDING_DEPENDENCY = "accelerate>=1.0"

# Stages write measured results between these markers; re-rendering keeps what they wrote.
RESULTS_START = "<!-- ascendbridge:results:start -->"
RESULTS_END = "<!-- ascendbridge:results:end -->"
NO_RESULTS = "No measured results yet: the Healing and Benchmark stages write them here from their gated runs."
_RESULTS_RE = re.compile(re.escape(RESULTS_START) + r"\n(.*?)\n?" + re.escape(RESULTS_END), re.S)

GITIGNORE = ".venv/\n__pycache__/\n*.pyc\n"
PYTHON_VERSION_FILE = ".python-version"
_NAME_RE = re.compile(r"^[a-z0-9][a-z0-9._-]*$")


class GeneratorError(ValueError):
    """A spec that cannot be rendered (bad requirement, wrong directory, missing runtime)."""


@dataclass
class Generation:
    """What `generate` did: files written or removed, and the `uv lock` run (None if not needed)."""

    changed: list[Path] = field(default_factory=list)
    lock: CommandResult | None = None

    @property
    def ok(self) -> bool:
        return self.lock is None or self.lock.ok


def _toml(value: str) -> str:
    """A TOML basic string (JSON string escapes are valid TOML)."""
    return json.dumps(value, ensure_ascii=False)


def _environment() -> jinja2.Environment:
    env = strict_environment(TEMPLATES_DIR, trim_blocks=True)
    env.filters["toml"] = _toml
    return env


def _requirement(text: str) -> str:
    try:
        Requirement(text)
    except InvalidRequirement as exc:
        raise GeneratorError(f"invalid requirement '{text}': {exc}") from None
    return text


def project_dependencies(spec: AdaptationSpec) -> list[str]:
    """transformers, the base set, then the spec's extra dependencies (validated, sorted)."""
    deps = [_requirement(spec.transformers_requirement), *BASE_DEPENDENCIES]
    if int((spec.device_plan or {}).get("devices") or 1) > 1 and "accelerate" not in spec.dependencies:
        deps.append(SHARDING_DEPENDENCY)
    for name, specifier in sorted(spec.dependencies.items()):
        req = _requirement(f"{name}{specifier}")
        if canonicalize_name(Requirement(req).name) != canonicalize_name(name):
            raise GeneratorError(f"dependency '{name}': specifier '{specifier}' is not a version specifier")
        deps.append(req)
    return deps


def _torch_sources(source: TorchSource) -> tuple[list[dict[str, str]], list[dict[str, str]]]:
    """uv sources and explicit indexes for extras whose torch does not come from PyPI/find-links.

    On x86_64, PyPI's torch is a CUDA build and torch_npu refuses to load next to it, so the
    `ascend` extra takes torch from the CPU index whenever one is configured (aarch64 PyPI
    wheels are CPU builds already, hence the marker).
    """
    indexes: dict[str, str] = {}  # url -> index name
    sources: list[dict[str, str]] = []
    for name in PROFILES:
        profile = source.profile(name)
        if profile.index_url:
            index = indexes.setdefault(profile.index_url, f"pytorch-{name}")
            sources.append({"index": index, "extra": name, "marker": ""})
    cpu_index = source.profile("cpu").index_url
    if cpu_index and not source.profile("ascend").index_url:
        sources.append({"index": indexes[cpu_index], "extra": "ascend", "marker": "platform_machine == 'x86_64'"})
    return sources, [{"name": n, "url": u} for u, n in indexes.items()]


def local_python_version(source: TorchSource) -> str | None:
    """The Python (X.Y) whose local torch wheel satisfies the cpu pin, when a wheel dir is used.

    The wheel dir usually holds one build for one interpreter; without the pin uv could pick
    another Python and download a multi-GB CUDA torch from PyPI instead.
    """
    if not source.wheel_dir:
        return None
    torch_req = next(
        (Requirement(r) for r in source.profile("cpu").requirements if Requirement(r).name == "torch"), None
    )
    if torch_req is None:
        return None
    versions: set[tuple[int, int]] = set()
    for wheel in Path(source.wheel_dir).glob("torch-*.whl"):
        try:
            name, version, _, tags = parse_wheel_filename(wheel.name)
        except InvalidWheelFilename:
            continue
        if name != "torch" or not torch_req.specifier.contains(version, prereleases=True):
            continue
        for tag in tags:
            match = re.fullmatch(r"cp(\d)(\d+)", tag.interpreter)
            if match:
                versions.add((int(match.group(1)), int(match.group(2))))
    if not versions:
        return None
    current = sys.version_info[:2]
    major, minor = current if current in versions else max(versions)
    return f"{major}.{minor}"


def _weights_origin(spec: AdaptationSpec) -> str:
    if not spec.model.has_weights:
        return "none published: this model is config-only and always runs config-initialised"
    if spec.model.source == "local":
        return "from the local model directory recorded in adaptation.json"
    if spec.model.source == "hf-cache":
        return "from the local Hugging Face cache"
    return "downloaded from the Hugging Face Hub; set HF_TOKEN for gated models"


def _results_block(existing_readme: str | None) -> str:
    body = NO_RESULTS
    if existing_readme:
        match = _RESULTS_RE.search(existing_readme)
        if match:
            body = match.group(1)
    return f"{RESULTS_START}\n{body}\n{RESULTS_END}"


def render_files(spec: AdaptationSpec, source: TorchSource, existing_readme: str | None = None) -> dict[str, str]:
    """Relative path -> text of every templated file (the runtime copy is handled separately)."""
    env = _environment()
    sources, indexes = _torch_sources(source)
    profiles = [source.profile(name) for name in PROFILES]
    for profile in profiles:
        for requirement in profile.requirements:
            _requirement(requirement)
    context: dict[str, Any] = {
        "spec": spec,
        "project_name": "ab-" + (re.sub(r"[^a-z0-9]+", "-", spec.name).strip("-") or "model"),
        "dependencies": project_dependencies(spec),
        "profiles": profiles,
        "pins": {p.name: ", ".join(p.requirements) for p in profiles},
        "wheel_dir": source.wheel_dir,
        "torch_sources": sources,
        "indexes": indexes,
        "weights_origin": _weights_origin(spec),
        "input_names": ", ".join(f"`{n}`" for n in spec.inputs.input_names) or "from the forward signature",
        "results_block": _results_block(existing_readme),
        "accuracy": accuracy_standard.resolve(spec.dtype.target, spec.tolerances, spec.task_family),
    }
    files = {
        "pyproject.toml": env.get_template("pyproject.toml.j2").render(context),
        "README.md": env.get_template("README.md.j2").render(context),
        "demo.py": env.get_template("demo.py.j2").render(context),
        SPEC_FILE: spec.to_json(),
        ".gitignore": GITIGNORE,
    }
    python_version = local_python_version(source)
    if python_version:
        files[PYTHON_VERSION_FILE] = python_version + "\n"
    return files


def _write_if_changed(path: Path, data: bytes) -> bool:
    if path.is_file() and path.read_bytes() == data:
        return False
    path.parent.mkdir(parents=True, exist_ok=True)
    write_bytes_atomic(path, data)
    return True


def _runtime_files(runtime_dir: Path) -> dict[str, Path]:
    if not (runtime_dir / "__init__.py").is_file():
        raise GeneratorError(f"runtime package missing: {runtime_dir}")
    return {
        p.relative_to(runtime_dir).as_posix(): p
        for p in sorted(runtime_dir.rglob("*"))
        if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc"
    }


def _sync_runtime(runtime_dir: Path, target: Path) -> list[Path]:
    """Copy the runtime verbatim; drop files the runtime no longer has."""
    wanted = _runtime_files(runtime_dir)
    changed = [target / rel for rel, src in wanted.items() if _write_if_changed(target / rel, src.read_bytes())]
    for rel in sorted(_runtime_files(target)) if (target / "__init__.py").is_file() else []:
        if rel not in wanted:
            (target / rel).unlink()
            changed.append(target / rel)
    return changed


def render_adaptation(
    spec: AdaptationSpec, directory: Path, torch_source: TorchSource | None = None, runtime_dir: Path = RUNTIME_DIR
) -> list[Path]:
    """Render the package into `directory` (named after the spec); return the files changed."""
    directory = Path(directory)
    if not _NAME_RE.match(spec.name) or ".." in spec.name:
        raise GeneratorError(f"adaptation name '{spec.name}' is not a safe directory name")
    if directory.name != spec.name:
        raise GeneratorError(f"spec is for '{spec.name}' but the directory is '{directory.name}'")
    source = torch_source or configured_torch_source()
    readme = directory / "README.md"
    files = render_files(spec, source, readme.read_text() if readme.is_file() else None)
    directory.mkdir(parents=True, exist_ok=True)
    changed = [directory / rel for rel, text in files.items() if _write_if_changed(directory / rel, text.encode())]
    stale = directory / PYTHON_VERSION_FILE
    if PYTHON_VERSION_FILE not in files and stale.is_file():
        stale.unlink()
        changed.append(stale)
    changed += _sync_runtime(Path(runtime_dir), directory / RUNTIME_NAME)
    return changed


def generate(
    spec: AdaptationSpec,
    directory: Path,
    torch_source: TorchSource | None = None,
    log: IO[str] | None = None,
    runtime_dir: Path = RUNTIME_DIR,
) -> Generation:
    """Render, then `uv lock` when pyproject.toml changed or there is no uv.lock yet."""
    directory = Path(directory)
    changed = render_adaptation(spec, directory, torch_source, runtime_dir)
    result = Generation(changed=changed)
    lock_file = directory / "uv.lock"
    if directory / "pyproject.toml" in changed or not lock_file.is_file():
        before = lock_file.read_bytes() if lock_file.is_file() else None
        result.lock = lock(directory, log=log)
        if not result.lock.ok and lock_file.is_file():
            # A lock that no longer matches must not survive: the next generate re-locks.
            lock_file.unlink()
        if (lock_file.read_bytes() if lock_file.is_file() else None) != before:
            result.changed.append(lock_file)
    return result


def update_readme_results(directory: Path, markdown: str) -> bool:
    """Replace the README's measured-results section (kept across re-renders); True if changed."""
    readme = Path(directory) / "README.md"
    text = readme.read_text()
    if not _RESULTS_RE.search(text):
        raise GeneratorError(f"{readme} has no measured-results section")
    block = f"{RESULTS_START}\n{markdown.strip()}\n{RESULTS_END}"
    return _write_if_changed(readme, _RESULTS_RE.sub(lambda _: block, text, count=1).encode())
