"""The adaptation gate: re-verify a generated package by inspecting and running it.

Independent of the generator on purpose (it never imports ascendbridge.package.generator or uv_env): it
checks the files, the spec, the pyproject extras and conflicts, that ab_runtime/ is the runtime
this repository ships and demo.py only delegates to it, `uv lock --check`, then syncs the
device's profile and runs `demo.py --dry-run` itself and verifies from the RESULT line which
device actually ran (no hidden fallback), the mode, and that every output has the expected shape
and is finite. Library parity: when the model's own library is installed in the package's
environment and the weights are local, `python -m ab_runtime.parity` must find the package's
outputs equal to the library's (sentence-transformers encode, transformers pipelines) within the
float32 tolerance. Its command line is adaptation/scripts/check_adaptation.py.
"""

from __future__ import annotations

import ast
import json
import math
import re
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ascendbridge.package.spec import RESULT_MARKER, SPEC_FILE, AdaptationSpec

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10
    import tomli as tomllib

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from pydantic import ValidationError

from ab_runtime.result import read_result
from ascendbridge.config import uv_binary
from ascendbridge.gatekit.envs import model_run_env
from ascendbridge.pip_site import with_site
from ascendbridge.stable_envs import ensure, env_dir, project_env
from ascendbridge.task_families import TASK_FAMILIES
from ascendbridge.workers.process import CommandResult, run_command

REFERENCE_RUNTIME = Path(__file__).resolve().parents[1] / "ab_runtime"
SYSTEM_MARKER = "ascendbridge-env.json"  # written by system mode (ascendbridge/package/system_env.py)
REQUIRED_FILES = (
    "pyproject.toml",
    "uv.lock",
    "README.md",
    SPEC_FILE,
    "demo.py",
    "ab_runtime/__init__.py",
    "ab_runtime/demo.py",
)
PROFILES = {"npu": "ascend", "cuda": "cuda", "cpu": "cpu"}
EXTRAS = ("ascend", "cuda", "cpu")
NAME_RE = re.compile(r"^[a-z0-9][a-z0-9._-]{0,199}$")
# demo.py must be exactly this wrapper (any docstring): the behaviour is the verified runtime's.
WRAPPERS = (
    "import sys\nfrom ab_runtime.demo import main\n"
    "if __name__ == '__main__':\n    raise SystemExit(main(sys.argv[1:]))\n",
    "import sys\nfrom ab_runtime.demo import main\nraise SystemExit(main(sys.argv[1:]))\n",
)


class BadInput(Exception):
    """Input the gate cannot check at all (exit 2)."""


@dataclass
class Check:
    name: str
    passed: bool
    detail: str


@dataclass
class Report:
    adaptation: str
    device: str
    checks: list[Check] = field(default_factory=list)
    result: dict[str, Any] | None = None
    error: str | None = None

    def add(self, name: str, passed: bool, detail: str) -> bool:
        self.checks.append(Check(name, passed, detail))
        return passed

    @property
    def passed(self) -> bool:
        return self.error is None and bool(self.checks) and all(c.passed for c in self.checks)

    @property
    def summary(self) -> str:
        """One line: how many checks passed, else the input error and the failed checks."""
        if self.passed:
            return f"{len(self.checks)} checks passed"
        failed = [f"{c.name}: {c.detail}" for c in self.checks if not c.passed]
        return "; ".join(([self.error] if self.error else []) + failed) or "no checks ran"

    def as_dict(self) -> dict[str, Any]:
        return {
            "adaptation": self.adaptation,
            "device": self.device,
            "passed": self.passed,
            "summary": self.summary,
            "error": self.error,
            "checks": [asdict(c) for c in self.checks],
            "result": self.result,
        }


def progress(message: str) -> None:
    print(f"check_adaptation: {message}", file=sys.stderr, flush=True)


def resolve_directory(name: str, root: Path) -> Path:
    if not NAME_RE.match(name) or ".." in name:
        raise BadInput(f"invalid adaptation name '{name}' (lower-case letters, digits, '.', '_', '-')")
    if not root.is_dir():
        raise BadInput(f"adaptations directory {root} does not exist")
    directory = (root / name).resolve()
    if directory.parent != root.resolve():
        raise BadInput(f"adaptation name '{name}' escapes {root}")
    if not directory.is_dir():
        raise BadInput(f"unknown adaptation '{name}' (no directory {directory})")
    return directory


def check_files(report: Report, directory: Path) -> None:
    missing = [f for f in REQUIRED_FILES if not (directory / f).is_file()]
    if missing:
        raise BadInput(f"adaptation '{report.adaptation}' is missing {', '.join(missing)}")
    report.add("files", True, f"all {len(REQUIRED_FILES)} required files present")


def load_spec(report: Report, directory: Path) -> AdaptationSpec:
    try:
        spec = AdaptationSpec.load(directory)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "(root)"
        raise BadInput(f"corrupt {SPEC_FILE}: {where}: {first['msg']}") from None
    except (ValueError, OSError) as exc:
        raise BadInput(f"unreadable {SPEC_FILE}: {str(exc).splitlines()[0]}") from None
    problems = []
    if spec.name != report.adaptation:
        problems.append(f"spec names '{spec.name}', not '{report.adaptation}'")
    if spec.task_family not in TASK_FAMILIES:
        problems.append(f"unknown task family '{spec.task_family}'")
    report.add(
        "spec", not problems, "; ".join(problems) or f"{spec.model.model_id}: {spec.task_family} via {spec.model_class}"
    )
    return spec


def _tree(root: Path) -> dict[str, bytes]:
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc"
    }


def check_runtime(report: Report, directory: Path) -> None:
    reference, copy = _tree(REFERENCE_RUNTIME), _tree(directory / "ab_runtime")
    differ = sorted(k for k in reference.keys() & copy.keys() if reference[k] != copy[k])
    missing = sorted(reference.keys() - copy.keys())
    extra = sorted(copy.keys() - reference.keys())
    problems = [
        f"{label}: {', '.join(names)}"
        for label, names in (("modified", differ), ("missing", missing), ("unexpected", extra))
        if names
    ]
    report.add(
        "runtime",
        not problems,
        "; ".join(problems) or f"ab_runtime/ is identical to the shipped runtime ({len(reference)} files)",
    )


def check_demo_wrapper(report: Report, directory: Path) -> None:
    try:
        body = ast.parse((directory / "demo.py").read_text()).body
    except (SyntaxError, UnicodeDecodeError) as exc:
        report.add("demo_wrapper", False, f"demo.py does not parse: {exc}")
        return
    if body and isinstance(body[0], ast.Expr) and isinstance(getattr(body[0], "value", None), ast.Constant):
        body = body[1:]  # the docstring
    shape = ast.dump(ast.Module(body=body, type_ignores=[]))
    ok = any(shape == ast.dump(ast.parse(w)) for w in WRAPPERS)
    report.add(
        "demo_wrapper",
        ok,
        "demo.py only delegates to ab_runtime.demo.main"
        if ok
        else "demo.py contains code besides the ab_runtime.demo.main wrapper",
    )


def requirement_names(requirements: Any, problems: list[str], where: str) -> set[str]:
    """Canonical names of a requirement list; unparsable entries are recorded as problems."""
    names: set[str] = set()
    for text in requirements if isinstance(requirements, list) else []:
        try:
            names.add(canonicalize_name(Requirement(str(text)).name))
        except InvalidRequirement:
            problems.append(f"{where}: invalid requirement {text!r}")
    return names


def check_pyproject(report: Report, directory: Path) -> None:
    try:
        data = tomllib.loads((directory / "pyproject.toml").read_text())
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        report.add("pyproject", False, f"pyproject.toml does not parse: {exc}")
        return
    project = data.get("project", {})
    extras = project.get("optional-dependencies", {})
    problems: list[str] = []
    if "transformers" not in requirement_names(project.get("dependencies", []), problems, "dependencies"):
        problems.append("transformers is not a dependency")
    for extra in EXTRAS:
        names = requirement_names(extras.get(extra, []), problems, f"extra '{extra}'")
        if "torch" not in names:
            problems.append(f"extra '{extra}' does not require torch")
        if extra == "ascend" and "torch-npu" not in names:
            problems.append("extra 'ascend' does not require torch-npu")
    conflicts = data.get("tool", {}).get("uv", {}).get("conflicts", [])
    groups = [
        {item.get("extra") for item in group if isinstance(item, dict)}
        for group in conflicts
        if isinstance(group, list)
    ]
    if not any(set(EXTRAS) <= g for g in groups):
        problems.append("extras ascend/cuda/cpu are not declared conflicting in [tool.uv] conflicts")
    report.add(
        "pyproject",
        not problems,
        "; ".join(problems) or "extras ascend (torch + torch-npu), cuda, cpu declared conflicting",
    )


def uv(directory: Path, args: list[str], timeout_s: float, extra_env: dict[str, str] | None = None) -> CommandResult:
    env = with_site(model_run_env(extra_env))  # the site's mirror or wheelhouse, as every sync
    return run_command([uv_binary(), *args], cwd=directory, env=env, timeout_s=timeout_s)


def _last_lines(text: str, n: int = 3) -> str:
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    return " | ".join(lines[-n:])[-500:]


def check_lock(report: Report, directory: Path) -> bool:
    progress("uv lock --check")
    res = uv(directory, ["lock", "--check"], 300)
    return report.add(
        "lock",
        res.ok,
        "uv.lock matches pyproject.toml" if res.ok else f"uv lock --check failed: {_last_lines(res.output)}",
    )


def _device_type(value: Any) -> str | None:
    return str(value).split(":")[0] if value else None


def check_result(report: Report, spec: AdaptationSpec, device: str, result: dict[str, Any]) -> None:
    ok = result.get("ok") is True and not result.get("error")
    report.add("result_ok", ok, "demo reported success" if ok else f"demo reported failure: {result.get('error')}")
    report.add("mode", result.get("mode") == "dry_run", f"mode is {result.get('mode')!r} (expected 'dry_run')")
    same = (result.get("model_id"), result.get("task_family")) == (spec.model.model_id, spec.task_family)
    report.add("identity", same, f"ran {result.get('model_id')} as {result.get('task_family')}")
    requested, used = _device_type(result.get("device_requested")), _device_type(result.get("device_used"))
    honest = requested == device and used == device and result.get("fallback") is False
    report.add(
        "device",
        honest,
        f"requested {device}, demo saw request {requested}, ran on {used}, fallback={result.get('fallback')}"
        + (f" ({result.get('fallback_reason')})" if result.get("fallback_reason") else ""),
    )
    check_outputs(report, spec, result.get("outputs"))
    built, total = result.get("layers_built"), result.get("layers_total")
    limit = spec.dry_run_max_layers
    if limit is not None or result.get("depth_reduced"):
        fine = (
            isinstance(built, int)
            and built >= 1
            and (limit is None or built <= limit)
            and (not result.get("depth_reduced") or (isinstance(total, int) and built < total))
        )
        report.add("depth", fine, f"built {built} of {total} layers (spec limit {limit})")
    check_proxy(report, spec, result.get("proxy"))


def check_proxy(report: Report, spec: AdaptationSpec, proxy: Any) -> None:
    """A registered reduced-depth proxy ran as one: the load recorded its depth and built a stack at most
    that deep (a package that ran the full model under a proxy's label fails here; a stack may keep one
    layer of each kind above it); a model without one ran at full depth."""
    wanted = spec.model.proxy
    if wanted is None:
        report.add("proxy", proxy is None, "full depth" if proxy is None else f"ran a proxy the spec has not: {proxy}")
        return
    stacks = proxy.get("stacks") if isinstance(proxy, dict) else None
    built = [pair[0] for pair in stacks.values()] if isinstance(stacks, dict) else []
    fine = (
        isinstance(proxy, dict)
        and proxy.get("layers") == wanted.layers
        and bool(built)
        and all(isinstance(n, int) and n >= 1 for n in built)
        and min(built) <= wanted.layers
    )
    report.add(
        "proxy", fine, f"{wanted.label()}: built {stacks}" if fine else f"expected {wanted.label()}, ran {proxy}"
    )


def check_outputs(report: Report, spec: AdaptationSpec, outputs: Any) -> None:
    if not isinstance(outputs, dict) or not outputs:
        report.add("outputs", False, "demo reported no outputs")
        return
    problems = []
    for name, info in outputs.items():
        shape = info.get("shape") if isinstance(info, dict) else None
        if not (isinstance(shape, list) and shape and all(isinstance(d, int) and d > 0 for d in shape)):
            problems.append(f"{name}: empty or invalid shape {shape}")
            continue
        if shape[0] != spec.inputs.batch_size:
            problems.append(f"{name}: batch dimension {shape[0]} != spec batch {spec.inputs.batch_size}")
        mean_abs = info.get("mean_abs")
        if info.get("finite") is not True or not isinstance(mean_abs, (int, float)) or not math.isfinite(mean_abs):
            problems.append(f"{name}: not finite (finite={info.get('finite')}, mean_abs={mean_abs})")
    report.add(
        "outputs",
        not problems,
        "; ".join(problems) or ", ".join(f"{n} {outputs[n]['shape']}" for n in outputs) + ", all finite",
    )


def system_marker(directory: Path) -> dict[str, Any] | None:
    """The record a system-mode environment leaves in `.venv/ascendbridge-env.json` (None: locked)."""
    try:
        data = json.loads((directory / ".venv" / SYSTEM_MARKER).read_text())
    except (OSError, json.JSONDecodeError):
        return None
    return data if isinstance(data, dict) and data.get("mode") == "system" else None


def check_system_env(report: Report, directory: Path, marker: dict[str, Any]) -> bool:
    """System mode: the venv sees the system stack, and torch / torch_npu come from it, not from
    the venv itself (nothing replaced them)."""
    python = directory / ".venv" / "bin" / "python"
    code = (
        "import json, sys, torch; print(json.dumps({'torch': torch.__version__, 'file': torch.__file__, "
        "'prefix': sys.prefix}))"
    )
    res = run_command([str(python), "-c", code], cwd=directory, timeout_s=300)
    found = json.loads(res.output.strip().splitlines()[-1]) if res.ok else None
    if found is None:
        return report.add("sync", False, f"system environment cannot import torch: {_last_lines(res.output)}")
    recorded = (marker.get("stack") or {}).get("torch")
    inside = Path(found["file"]).resolve().is_relative_to(Path(found["prefix"]).resolve())
    if found["torch"] != recorded or inside:
        return report.add(
            "sync",
            False,
            f"torch {found['torch']} at {found['file']} is not the system stack's "
            f"torch {recorded}" + (" (installed into the venv)" if inside else ""),
        )
    return report.add(
        "sync", True, f"system environment on {marker.get('base')}: torch {found['torch']} from the system stack"
    )


def run_demo(report: Report, directory: Path, spec: AdaptationSpec, device: str, timeout_s: float) -> None:
    profile = PROFILES[device]
    marker = system_marker(directory)
    if marker is not None:
        progress("system environment: checking its stack")
        if not check_system_env(report, directory, marker):
            return
        argv = [str(directory / ".venv" / "bin" / "python"), "demo.py", "--dry-run", "--device", device]
        progress(f"demo.py --dry-run --device {device}")
        res = run_command(argv, cwd=directory, timeout_s=timeout_s, env=model_run_env())
    else:
        # The lock's stable environment (ascendbridge.stable_envs) unless the package has its own .venv.
        stable = None if (directory / ".venv").exists() else env_dir(directory, profile)
        target = {"UV_PROJECT_ENVIRONMENT": str(stable)} if stable else {}
        progress(f"uv sync --locked --extra {profile}" + (f" into {stable}" if stable else ""))

        def sync() -> CommandResult:
            return uv(directory, ["sync", "--locked", "--extra", profile], 1800, target)

        synced = ensure(stable, sync) if stable else sync()
        if not report.add(
            "sync",
            synced is None or synced.ok,
            f"environment synced for extra '{profile}'"
            if synced is None or synced.ok
            else f"uv sync --extra {profile} failed: {_last_lines(synced.output)}",
        ):
            return
        progress(f"demo.py --dry-run --device {device}")
        argv = ["run", "--no-sync", "python", "demo.py", "--dry-run", "--device", device]
        res = uv(directory, argv, timeout_s, target)
    exited = "timed out" if res.timed_out else f"exit code {res.exit_code}"
    report.add(
        "demo_exit",
        res.ok,
        f"demo.py {exited} in {res.duration_s:.1f} s" + ("" if res.ok else f": {_last_lines(res.output)}"),
    )
    lines = [ln for ln in res.output.splitlines() if ln.startswith(RESULT_MARKER)]
    if len(lines) != 1:
        report.add("result_line", False, f"expected exactly one {RESULT_MARKER.strip()} line, got {len(lines)}")
        return
    try:
        result = json.loads(lines[0][len(RESULT_MARKER) :])
    except json.JSONDecodeError as exc:
        report.add("result_line", False, f"RESULT line is not JSON: {exc}")
        return
    if not isinstance(result, dict):
        report.add("result_line", False, "RESULT line is not a JSON object")
        return
    report.add("result_line", True, "one RESULT line parsed")
    report.result = result
    check_result(report, spec, device, result)


def check_parity(report: Report, directory: Path, spec: AdaptationSpec, timeout_s: float) -> None:
    """The package against the model's own library on real input (ab_runtime.parity). Weights on
    the Hub are not downloaded by a gate: parity is then reported as not checked, with why."""
    if not spec.model.has_weights or spec.model.source == "huggingface":
        report.add("library_parity", True, "not checked: no local weights (parity compares real weights only)")
        return
    progress("python -m ab_runtime.parity")
    # the environment the demo ran in: its own .venv, else its lock's stable one
    res = uv(directory, ["run", "--no-sync", "python", "-m", "ab_runtime.parity"], timeout_s, project_env(directory))
    parity = read_result(res.output)
    if parity is None:
        report.add(
            "library_parity", False, f"parity check gave no result (exit {res.exit_code}): {_last_lines(res.output)}"
        )
        return
    if not parity.get("checked"):
        report.add("library_parity", True, f"not checked: {parity.get('reason')}")
        return
    figures = (
        f" (max abs err scaled {parity['max_abs_err']:.2g}, min cosine {parity['min_cosine']:.7f}, "
        f"{parity['inputs']} inputs)"
        if parity.get("max_abs_err") is not None
        else ""
    )
    report.add(
        "library_parity", bool(parity.get("ok")) and res.ok, f"{parity.get('library')}: {parity.get('reason')}{figures}"
    )


def gate(name: str, root: Path, device: str, run: bool, timeout_s: float) -> Report:
    report = Report(adaptation=name, device=device)
    try:
        directory = resolve_directory(name, root)
        check_files(report, directory)
        spec = load_spec(report, directory)
    except BadInput as exc:
        report.error = str(exc)
        return report
    check_runtime(report, directory)
    check_demo_wrapper(report, directory)
    check_pyproject(report, directory)
    if check_lock(report, directory) and run:
        # Run even when e.g. the runtime copy was modified: the report then also shows what the
        # modified code claimed, which is what a reviewer wants to see next to the FAIL.
        run_demo(report, directory, spec, device, timeout_s)
        if report.passed:
            check_parity(report, directory, spec, timeout_s)
    elif run:
        report.add("run", False, "demo not run: uv.lock does not match pyproject.toml")
    return report
