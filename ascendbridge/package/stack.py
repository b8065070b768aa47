"""Software stacks: what the stack of an interpreter is, its id, and whether it fits a spec.

In system mode (ascendbridge.envmode) the interpreter's stack is checked against COMPATIBILITY
before any model runs; a mismatch is one line (`StackMismatch`). Every result carries the stack
(ascendbridge/gatekit/inner/stack.py probes it in the model's own interpreter) and its short id.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from packaging.requirements import InvalidRequirement, Requirement
from packaging.version import InvalidVersion, Version

from ascendbridge.envmode import SYSTEM_MARKER, EnvChoice, EnvModeError, env_choice
from ascendbridge.gatekit.checker import json_report
from ascendbridge.gatekit.envs import run_inner
from ascendbridge.stable_envs import python as package_python
from ascendbridge.stack_identity import stack_id

PROBE_TIMEOUT_S = 120.0
MARKER = SYSTEM_MARKER

# torch_npu release -> the torch release it is built for (Ascend's published pairs). A torch_npu
# whose release is not listed must match torch's release exactly (X.Y.Z, local tags ignored).
COMPATIBILITY: dict[str, str] = {
    "2.1.0": "2.1.0",
    "2.3.1": "2.3.1",
    "2.4.0": "2.4.0",
    "2.5.1": "2.5.1",
    "2.6.0": "2.6.0",
    "2.7.1": "2.7.1",
    "2.8.0": "2.8.0",
    "2.9.1": "2.9.1",
}
# The runtime (ab_runtime) uses torch APIs present since this release.
MIN_TORCH = Version("2.1.0")


class StackError(ValueError):
    """A stack that cannot be used (failed probe, failed environment step); one line."""


class StackMismatch(StackError):
    """The stack's versions do not fit the compatibility table or the spec's requirements."""


def env_for_model(model: Any) -> EnvChoice:
    """The EnvChoice of a board ModelRecord (its env_mode / env_python, else the run's)."""
    try:
        return env_choice(getattr(model, "env_mode", None) or None, getattr(model, "env_python", None) or None)
    except EnvModeError as exc:
        raise StackError(str(exc)) from None


def system_marker(directory: Path) -> dict[str, Any] | None:
    """The record a system-mode `.venv` keeps (ascendbridge/package/system_env.py), or None (locked)."""
    try:
        data = json.loads((Path(directory) / ".venv" / MARKER).read_text())
    except (OSError, json.JSONDecodeError):
        return None
    return data if isinstance(data, dict) and data.get("mode") == "system" else None


def probe_stack(python: Path) -> dict[str, Any]:
    """Run ascendbridge/gatekit/inner/stack.py with `python`; the stack as a dict (StackError if it fails)."""
    result = run_inner(Path(python), "stack.py", [], timeout_s=PROBE_TIMEOUT_S)
    data = json_report(result.output) if result.ok else None
    if data is None:
        raise StackError(f"stack probe with {python} failed (exit {result.exit_code}): {result.tail(2)}")
    return data


def _release(text: str, what: str) -> Version:
    try:
        version = Version(text)
    except InvalidVersion:
        raise StackMismatch(f"{what} version '{text}' is not a version") from None
    return Version(".".join(str(p) for p in version.release[:3]))


def check_stack(stack: dict[str, Any], transformers_requirement: str, device: str = "cpu") -> None:
    """Raise StackMismatch (one line) unless the stack fits: torch present and >= MIN_TORCH,
    torch_npu paired with torch per COMPATIBILITY (and present when the device is npu), and
    transformers absent (installed at the lock's pin) or inside the spec's range."""
    if not stack.get("torch"):
        raise StackMismatch(f"the system interpreter {stack.get('executable', '')} has no torch")
    torch_release = _release(stack["torch"], "torch")
    if torch_release < MIN_TORCH:
        raise StackMismatch(f"torch {stack['torch']} is older than the supported {MIN_TORCH}")
    npu = stack.get("torch_npu")
    if device == "npu" and not npu:
        raise StackMismatch(f"device npu needs torch_npu, but the system stack (torch {stack['torch']}) has none")
    if npu:
        npu_release = str(_release(npu, "torch_npu"))
        wanted = COMPATIBILITY.get(npu_release, npu_release)
        if str(torch_release) != wanted:
            raise StackMismatch(
                f"torch_npu {npu} needs torch {wanted}, but the system stack has torch {stack['torch']}"
            )
    installed = stack.get("transformers")
    if installed:
        try:
            requirement = Requirement(transformers_requirement)
        except InvalidRequirement:
            raise StackMismatch(f"spec requirement '{transformers_requirement}' is not a requirement") from None
        if not requirement.specifier.contains(installed, prereleases=True):
            raise StackMismatch(
                f"transformers {installed} of the system stack is outside the spec's '{transformers_requirement}'"
            )


def env_stack(directory: Path) -> dict[str, Any]:
    """The stack of an adaptation's synced environment (its `.venv` or its lock's stable one), as
    stored with results: {"stack_id", "data"}.

    A system-mode venv that installed nothing runs exactly the stack its sync just probed and
    checked (recorded in its marker), so that probe is reused instead of importing torch again."""
    marker = system_marker(directory)
    if marker is not None and not marker.get("installed") and marker.get("stack"):
        return {"stack_id": stack_id(marker["stack"]), "data": marker["stack"]}
    data = probe_stack(package_python(Path(directory)))
    return {"stack_id": stack_id(data), "data": data}
