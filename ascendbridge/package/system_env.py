"""System mode: a package's `.venv` layered on an interpreter that already has torch / torch_npu.

`python -m venv --system-site-packages` on the given interpreter, plus a `.pth` file adding that
interpreter's own site-packages with `site.addsitedir` (so a vendor venv or conda env works too, not only a bare system
Python); then only the packages the lock pins and the interpreter lacks are installed with
`uv pip install --no-deps` at the lock's versions. torch and torch_npu are never installed. With
nothing missing no uv is needed at all (a plain host with torch and transformers). The venv
records its mode and stack in `.venv/ascendbridge-env.json`, which `uv_env.run_in_env` and the
gates read to run it with its own interpreter instead of `uv run`.
"""

from __future__ import annotations

import json
import shutil
import sys
import time
from pathlib import Path
from typing import IO, Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10
    import tomli as tomllib

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from ab_runtime.fileops import write_text_atomic
from ascendbridge.config import torch_source, uv_binary
from ascendbridge.envmode import EnvChoice
from ascendbridge.package.spec import AdaptationSpec
from ascendbridge.package.stack import MARKER, StackError, check_stack, probe_stack, stack_id
from ascendbridge.package.stack import system_marker as marker
from ascendbridge.pip_site import SiteError, with_site
from ascendbridge.workers.process import CommandResult, run_command

PTH_FILE = "_ascendbridge_system_stack.pth"
NEVER_INSTALLED = frozenset({"torch", "torch-npu"})
STEP_TIMEOUT_S = 600.0

_SITE_DIRS = (
    "import json, site, sysconfig; "
    "print(json.dumps(sorted({sysconfig.get_paths()['purelib'], sysconfig.get_paths()['platlib']})))"
)
_INSTALLED = (
    "import json; from importlib import metadata as m; "
    "print(json.dumps({(d.metadata['Name'] or '').lower(): d.version for d in m.distributions()}))"
)


def _failed(argv: list[str], message: str, started: float) -> CommandResult:
    return CommandResult(
        argv=argv,
        exit_code=2,
        duration_s=time.monotonic() - started,
        timed_out=False,
        output=f"error: {message}\n",
        truncated=False,
    )


def _json_of(python: Path, code: str) -> Any:
    res = run_command([str(python), "-c", code], timeout_s=STEP_TIMEOUT_S)
    if not res.ok:
        raise StackError(f"{python} could not list its packages: {res.tail(1)}")
    return json.loads(res.output.strip().splitlines()[-1])


def _uv() -> str | None:
    try:
        return uv_binary()
    except RuntimeError:  # a plain host with torch and no uv: fine while nothing is missing
        return None


def _direct_requirements(directory: Path) -> list[Requirement]:
    """pyproject.toml's own dependencies (what a host without uv can at least check)."""
    data = tomllib.loads((directory / "pyproject.toml").read_text())
    return [Requirement(r) for r in data.get("project", {}).get("dependencies", [])]


def pinned_requirements(directory: Path, log: IO[str] | None = None) -> list[Requirement]:
    """The lock's pins of the base dependencies (no device extra), for this platform; without
    uv or without a lock (a package rendered but never locked, as bench/accelerator_check makes
    them), the package's direct dependencies."""
    uv = _uv()
    if uv is None or not (directory / "uv.lock").exists():
        return [r for r in _direct_requirements(directory) if canonicalize_name(r.name) not in NEVER_INSTALLED]
    res = run_command(
        [uv, "export", "--frozen", "--no-hashes", "--no-header", "--no-emit-project", "--no-dev", "--no-annotate"],
        cwd=directory,
        timeout_s=STEP_TIMEOUT_S,
        log=log,
    )
    if not res.ok:
        raise StackError(f"uv export of {directory.name}'s lock failed: {res.tail(1)}")
    wanted: list[Requirement] = []
    for line in res.output.splitlines():
        line = line.strip()
        if not line or line.startswith(("#", "-")):
            continue
        try:
            req = Requirement(line)
        except InvalidRequirement:
            continue
        if (req.marker is None or req.marker.evaluate()) and canonicalize_name(req.name) not in NEVER_INSTALLED:
            wanted.append(req)
    return wanted


def _make_venv(directory: Path, base: Path, log: IO[str] | None) -> Path:
    venv = directory / ".venv"
    if venv.exists():
        shutil.rmtree(venv)
    res = run_command(
        [str(base), "-m", "venv", "--system-site-packages", "--without-pip", str(venv)],
        timeout_s=STEP_TIMEOUT_S,
        log=log,
    )
    if not res.ok:
        raise StackError(f"{base} -m venv failed: {res.tail(1)}")
    python = venv / "bin" / "python"
    own = _json_of(python, _SITE_DIRS)
    # addsitedir, not plain path lines: the base's own .pth files (a layered vendor env) apply too.
    lines = [f"import site; site.addsitedir({d!r})" for d in _json_of(base, _SITE_DIRS)]
    (Path(own[0]) / PTH_FILE).write_text("\n".join(lines) + "\n")
    return python


def sync_system(directory: Path, choice: EnvChoice, device: str, log: IO[str] | None = None) -> CommandResult:
    """Make (or keep) the system-mode `.venv`; a failed CommandResult with one `error:` line when
    the stack does not fit or anything else fails. Nothing is installed before the check."""
    directory = Path(directory)
    argv = ["system-env", str(choice.python), str(directory)]
    started = time.monotonic()
    try:
        base = choice.python
        assert base is not None  # envmode.env_choice refuses system mode without an interpreter
        spec = AdaptationSpec.load(directory)
        stack = probe_stack(base)
        check_stack(stack, spec.transformers_requirement, device)
        current = marker(directory)
        python = directory / ".venv" / "bin" / "python"
        if current is None or current.get("base") != str(base) or not python.is_file():
            python = _make_venv(directory, base, log)
        installed = {canonicalize_name(k): v for k, v in _json_of(python, _INSTALLED).items()}
        missing = [req for req in pinned_requirements(directory, log) if canonicalize_name(req.name) not in installed]
        if missing:
            uv = _uv()
            if uv is None:
                raise StackError(
                    f"{', '.join(r.name for r in missing)} missing from {choice.python} and no uv to install them"
                )
            cmd = [uv, "pip", "install", "--python", str(python), "--no-deps", *(str(r) for r in missing)]
            wheel_dir = torch_source().wheel_dir
            if wheel_dir:
                cmd += ["--find-links", wheel_dir]
            res = run_command(cmd, cwd=directory, env=with_site(), timeout_s=STEP_TIMEOUT_S, log=log)
            if not res.ok:
                raise StackError(f"installing {len(missing)} missing package(s) failed: {res.tail(1)}")
        record = {
            "mode": "system",
            "base": str(choice.python),
            "stack": stack,
            "stack_id": stack_id(stack),
            "installed": sorted(str(r) for r in missing),
        }
        # Replace, never write into: a staging copy's .venv files are hard links to the live ones.
        marker_path = directory / ".venv" / MARKER
        write_text_atomic(marker_path, json.dumps(record, indent=1, sort_keys=True) + "\n")
    except (StackError, SiteError, ValueError, OSError) as exc:
        return _failed(argv, str(exc), started)
    message = (
        f"system environment on {choice.python}: stack {record['stack_id']}; installed "
        f"{', '.join(record['installed']) or 'nothing (all present)'}\n"
    )
    if log:
        log.write(message)
    return CommandResult(
        argv=argv, exit_code=0, duration_s=time.monotonic() - started, timed_out=False, output=message, truncated=False
    )
