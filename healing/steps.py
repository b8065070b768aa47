"""The steps of one healing attempt, each a contained subprocess: lock, sync, dry run, real run.

A step returns None when it passed or the Failure the rules classify. Driven through
ascendbridge.package.uv_env (the same uv calls every stage uses) and ascendbridge.package.generator (re-rendering
after a spec fix), never by editing rendered files.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from ascendbridge.package import uv_env
from ascendbridge.package.generator import GeneratorError, generate
from ascendbridge.package.spec import AdaptationSpec
from ascendbridge.workers.process import CommandResult
from healing.failure import Failure, Phase
from healing.settings import HealingSettings


@dataclass
class DemoOutcome:
    failure: Failure | None
    result: dict[str, Any] | None
    duration_s: float


def rerender(spec: AdaptationSpec, directory: Path, log: IO[str] | None) -> Failure | None:
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


def lock(directory: Path, log: IO[str] | None) -> Failure | None:
    """`uv lock` (a no-op when current): the sync below is --locked."""
    try:
        result = uv_env.lock(directory, log=log)
    except FileNotFoundError as exc:
        return _broken_package("lock", exc)
    return None if result.ok else Failure.from_command("lock", result)


def sync(directory: Path, settings: HealingSettings, log: IO[str] | None) -> Failure | None:
    try:
        result = uv_env.sync(directory, settings.profile, timeout_s=settings.sync_timeout_s, log=log)
    except FileNotFoundError as exc:
        return _broken_package("sync", exc)
    return None if result.ok else Failure.from_command("sync", result, settings.sync_timeout_s)


def demo(directory: Path, settings: HealingSettings, dry_run: bool, log: IO[str] | None) -> DemoOutcome:
    """Run demo.py on the configured device; a run passes only with exit 0 and an ok RESULT."""
    args = ("--dry-run",) if dry_run else ()
    run = uv_env.run_demo(directory, args, device=settings.device, timeout_s=settings.demo_timeout_s, log=log)
    phase: Phase = "dry_run" if dry_run else "real_run"
    command: CommandResult = run.command
    expected_mode = "dry_run" if dry_run else "pretrained"
    if run.ok and run.result and run.result.get("mode") == expected_mode:
        return DemoOutcome(None, run.result, command.duration_s)
    return DemoOutcome(Failure.from_command(phase, command, settings.demo_timeout_s), run.result, command.duration_s)
