"""The steps of one healing attempt, each a contained subprocess: lock, sync, dry run, real run.

A step returns None when it passed or the Failure the rules classify. Driven through
adaptation.uv_env (the same uv calls every stage uses) and adaptation.generator (re-rendering
after a spec fix), never by editing rendered files.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Optional

from adaptation import uv_env
from adaptation.generator import GeneratorError, generate
from adaptation.healing.failure import Failure, Phase
from adaptation.healing.settings import HealingSettings
from adaptation.spec import AdaptationSpec
from ascendbridge.runtime.process import CommandResult

_WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".ckpt", ".gguf")


@dataclass
class DemoOutcome:
    failure: Optional[Failure]
    result: Optional[dict[str, Any]]
    duration_s: float


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


def rerender(spec: AdaptationSpec, directory: Path, log: Optional[IO[str]]) -> Optional[Failure]:
    """Render the package from the (fixed) spec; `uv lock` runs when pyproject.toml changed."""
    try:
        generation = generate(spec, directory, log=log)
    except (GeneratorError, ValueError, OSError) as exc:
        return Failure(phase="render", exit_code=None, timed_out=False, output=f"GeneratorError: {exc}\n")
    if generation.lock is not None and not generation.lock.ok:
        return Failure.from_command("lock", generation.lock)
    return None


def _broken_package(phase: Phase, exc: Exception) -> Failure:
    """The package itself is unusable (e.g. pyproject.toml missing): nothing ran."""
    return Failure(phase=phase, exit_code=None, timed_out=False, output=f"{type(exc).__name__}: {exc}\n")


def lock(directory: Path, log: Optional[IO[str]]) -> Optional[Failure]:
    """`uv lock` (a no-op when current): the sync below is --locked."""
    try:
        result = uv_env.lock(directory, log=log)
    except FileNotFoundError as exc:
        return _broken_package("lock", exc)
    return None if result.ok else Failure.from_command("lock", result)


def sync(directory: Path, settings: HealingSettings, log: Optional[IO[str]]) -> Optional[Failure]:
    try:
        result = uv_env.sync(directory, settings.profile, timeout_s=settings.sync_timeout_s, log=log)
    except FileNotFoundError as exc:
        return _broken_package("sync", exc)
    return None if result.ok else Failure.from_command("sync", result, settings.sync_timeout_s)


def demo(directory: Path, settings: HealingSettings, dry_run: bool, log: Optional[IO[str]]) -> DemoOutcome:
    """Run demo.py on the configured device; a run passes only with exit 0 and an ok RESULT."""
    args = ("--dry-run",) if dry_run else ()
    run = uv_env.run_demo(directory, args, device=settings.device, timeout_s=settings.demo_timeout_s, log=log)
    phase = "dry_run" if dry_run else "real_run"
    command: CommandResult = run.command
    expected_mode = "dry_run" if dry_run else "pretrained"
    if run.ok and run.result and run.result.get("mode") == expected_mode:
        return DemoOutcome(None, run.result, command.duration_s)
    return DemoOutcome(Failure.from_command(phase, command, settings.demo_timeout_s), run.result, command.duration_s)
