"""uv operations on one adaptation directory (lock, sync, run its demo), contained.

The generator, the healer and the benchmark stage all drive adaptation environments through
these few functions so every uv call gets the same clean environment, timeout and output cap
(`ascendbridge.workers.process.run_command`). The gate (`adaptation/scripts/check_adaptation.py`) does NOT
use this module: it calls uv itself, so a bug here cannot make it pass.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import IO, Any

# A run's RESULT line is read with the runtime's own reader (the same marker the run printed).
from ab_runtime import phases
from ab_runtime.result import read_result as parse_result
from ascendbridge.config import uv_binary
from ascendbridge.envmode import EnvChoice, EnvModeError, env_choice
from ascendbridge.gatekit.envs import model_run_env
from ascendbridge.package import system_env
from ascendbridge.package.system_env import sync_system
from ascendbridge.pip_site import SiteError, lock_matches_site, locked_sync_steps, missing_package_error, with_site
from ascendbridge.stable_envs import ensure, env_dir, kernel_cache_env, project_env
from ascendbridge.workers.process import CommandResult, run_command

# demo.py --device value -> the pyproject extra that installs the matching torch
DEVICE_PROFILES: dict[str, str] = {"npu": "ascend", "cuda": "cuda", "cpu": "cpu"}
PROFILES: tuple[str, ...] = ("ascend", "cuda", "cpu")
DEVICE_OF_PROFILE: dict[str, str] = {p: d for d, p in DEVICE_PROFILES.items()}

LOCK_TIMEOUT_S = 300.0
SYNC_TIMEOUT_S = 1800.0  # a first sync of a CUDA/NPU profile downloads gigabytes
DEMO_TIMEOUT_S = 600.0


def uv_environment(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The process environment for uv and model runs: ours minus foreign venv pointers, plus the
    site's package sources (ascendbridge.pip_site: its mirror or wheelhouse, never the public index)
    and the per-host kernel caches (ascendbridge.stable_envs), so compiled kernels are reused."""
    base = {"UV_NO_PROGRESS": os.environ.get("UV_NO_PROGRESS", "1"), **kernel_cache_env()}
    return with_site(model_run_env({**base, **(extra or {})}))


def profile_for_device(device: str) -> str:
    """Map a demo --device (npu|cuda|cpu) to its extra; raise ValueError on anything else."""
    if device not in DEVICE_PROFILES:
        raise ValueError(f"unknown device '{device}' (expected one of: {', '.join(DEVICE_PROFILES)})")
    return DEVICE_PROFILES[device]


def _uv(
    directory: Path, args: Sequence[str], timeout_s: float, log: IO[str] | None, env: Mapping[str, str] | None = None
) -> CommandResult:
    directory = Path(directory)
    if not (directory / "pyproject.toml").is_file():
        raise FileNotFoundError(f"no pyproject.toml in {directory}")
    try:
        environment = uv_environment(env)
    except SiteError as exc:
        return CommandResult([uv_binary(), *args], 2, 0.0, False, f"error: {exc}\n", False)
    return run_command([uv_binary(), *args], cwd=directory, env=environment, timeout_s=timeout_s, log=log)


def _locked_sync(
    directory: Path, args: Sequence[str], timeout_s: float, log: IO[str] | None, venv: Path | None = None
) -> CommandResult:
    """`uv sync --locked ARGS` into `venv` (default: the project's `.venv`), or, when the site's
    index is not the one the lock names (a lock made against PyPI on a mirrored or air-gapped
    host), the lock's exact pins and hashes installed from the site's index
    (ascendbridge.pip_site.locked_sync_steps)."""
    target = {"UV_PROJECT_ENVIRONMENT": str(venv)} if venv else {}
    try:
        environment = uv_environment(target)
    except SiteError as exc:
        return CommandResult(["sync", str(directory)], 2, 0.0, False, f"error: {exc}\n", False)
    if lock_matches_site(Path(directory), environment):
        return _uv(directory, ["sync", "--locked", *args], timeout_s, log, target)
    with tempfile.TemporaryDirectory() as tmp:
        for step in locked_sync_steps(Path(directory), uv_binary(), args, Path(tmp) / "requirements.txt", venv):
            res = run_command(step, cwd=directory, env=environment, timeout_s=timeout_s, log=log)
            if not res.ok:
                message = missing_package_error(res.output, environment)
                return replace(res, output=f"{message}\n") if message else res
    return res


def lock(
    directory: Path, *, check: bool = False, timeout_s: float = LOCK_TIMEOUT_S, log: IO[str] | None = None
) -> CommandResult:
    """`uv lock` (or `uv lock --check`: fail when uv.lock does not match pyproject.toml)."""
    with phases.phase("env_sync"):
        return _uv(directory, ["lock", "--check"] if check else ["lock"], timeout_s, log)


def sync(
    directory: Path,
    profile: str,
    *,
    timeout_s: float = SYNC_TIMEOUT_S,
    log: IO[str] | None = None,
    env: EnvChoice | None = None,
) -> CommandResult:
    """Make the adaptation's environment for one profile, in the environment mode of `env` (default:
    the run's, ASCENDBRIDGE_ENV): `locked` = `uv sync --locked --extra PROFILE` (exactly the
    lock's packages) into the stable environment of its lock (ascendbridge.stable_envs; reused
    without a sync when one is ready) unless the package has its own `.venv` or stable
    environments are off; `system` = layered on the given interpreter's torch (ascendbridge.package.system_env).
    A bad mode or a mismatched stack comes back as a failed result with one `error:` line."""
    if profile not in PROFILES:
        raise ValueError(f"unknown profile '{profile}' (expected one of: {', '.join(PROFILES)})")
    with phases.phase("env_sync"):
        return _sync(Path(directory), profile, timeout_s, log, env)


def _sync(directory: Path, profile: str, timeout_s: float, log: IO[str] | None, env: EnvChoice | None) -> CommandResult:
    if env is None:
        try:
            env = env_choice()
        except EnvModeError as exc:
            return CommandResult(["sync", str(directory)], 2, 0.0, False, f"error: {exc}\n", False)
    if env.system:
        return sync_system(directory, env, DEVICE_OF_PROFILE[profile], log)
    if system_env.marker(directory) is not None:  # a system-mode venv must not receive the lock's torch
        shutil.rmtree(Path(directory) / ".venv")
    stable = None if (Path(directory) / ".venv").exists() else env_dir(directory, profile)
    if stable is None:
        return _locked_sync(directory, ["--extra", profile], timeout_s, log)
    synced = ensure(stable, lambda: _locked_sync(directory, ["--extra", profile], timeout_s, log, stable))
    if synced is not None:
        return synced
    message = f"environment for this lock reused: {stable}\n"
    if log:
        log.write(message)
    return CommandResult(["sync", str(directory)], 0, 0.0, False, message, False)


def run_in_env(
    directory: Path,
    argv: Sequence[str],
    *,
    timeout_s: float = DEMO_TIMEOUT_S,
    log: IO[str] | None = None,
    env: Mapping[str, str] | None = None,
) -> CommandResult:
    """Run `python ARGV...` in the adaptation's synced environment, cwd = the adaptation; the phases
    its RESULT line reports are added to this process's (ab_runtime/phases.py).

    `--no-sync`: a run never changes the environment (a plain `uv run` would re-sync it
    without the profile's extra and could remove torch).
    A system-mode environment runs with its own interpreter directly (no uv on such hosts); a
    package without its own `.venv` runs in the stable environment of its lock.
    """
    if system_env.marker(directory) is not None:
        python = Path(directory) / ".venv" / "bin" / "python"
        extra = {"VIRTUAL_ENV": str(python.parent.parent), **(env or {})}
        res = run_command(
            [str(python), *argv], cwd=Path(directory), env=uv_environment(extra), timeout_s=timeout_s, log=log
        )
    else:
        target = project_env(directory)
        res = _uv(directory, ["run", "--no-sync", "python", *argv], timeout_s, log, {**target, **(env or {})})
    phases.add_reported((parse_result(res.output) or {}).get("phases"))
    return res


@dataclass
class DemoRun:
    """One demo.py run: the contained command and its parsed RESULT line (None if absent)."""

    command: CommandResult
    result: dict[str, Any] | None

    @property
    def ok(self) -> bool:
        return self.command.ok and bool(self.result and self.result.get("ok"))


def run_demo(
    directory: Path,
    args: Sequence[str] = ("--dry-run",),
    *,
    device: str = "cpu",
    timeout_s: float = DEMO_TIMEOUT_S,
    log: IO[str] | None = None,
    env: Mapping[str, str] | None = None,
) -> DemoRun:
    """Run `demo.py --device DEVICE ARGS...` (environment must be synced) and parse its result."""
    profile_for_device(device)
    command = run_in_env(directory, ["demo.py", "--device", device, *args], timeout_s=timeout_s, log=log, env=env)
    return DemoRun(command=command, result=parse_result(command.output))
