"""The healing gate: independent re-verification of what the healer claims.

1. The healer's evidence must exist and belong to the current spec (sha256 of adaptation.json)
   and device; otherwise there is nothing to re-verify and the gate fails at once.
2. `adaptation/scripts/check_adaptation.py --adapt NAME --json` as a separate process (files,
   spec, lock, sync, a fresh dry run with device/shape/finiteness checks).
3. When a real-weights run was claimed, it is re-run here (`demo.py` without --dry-run, through
   uv directly, not the healer's helpers) and must again be ok, pretrained, on the requested
   device without fallback, with finite outputs of the same names and shapes as claimed.
"""

from __future__ import annotations

import math
from dataclasses import field
from pathlib import Path
from typing import Any

from pydantic.dataclasses import dataclass

from ab_runtime.result import read_result
from ascendbridge.config import uv_binary
from ascendbridge.gatekit.envs import model_run_env
from ascendbridge.gatekit.report import GateReport
from ascendbridge.package.checker import run_package_checker
from ascendbridge.stable_envs import project_env
from ascendbridge.workers.process import run_command
from healing.evidence import read_evidence, spec_digest


def outputs_problem(outputs: Any) -> str | None:
    """None when every output has a non-empty shape and is finite; else what is wrong."""
    if not isinstance(outputs, dict) or not outputs:
        return "no outputs reported"
    for name, info in outputs.items():
        shape = info.get("shape") if isinstance(info, dict) else None
        if not isinstance(shape, list) or not shape or any(not isinstance(d, int) or d <= 0 for d in shape):
            return f"output {name} has no valid shape ({shape})"
        if info.get("finite") is not True:
            return f"output {name} is not finite"
        mean_abs = info.get("mean_abs")
        if isinstance(mean_abs, float) and not math.isfinite(mean_abs):
            return f"output {name} has a non-finite mean"
    return None


def verify_real_run(
    directory: Path, device: str, claimed: dict[str, Any], timeout_s: float
) -> tuple[bool, str, dict[str, Any]]:
    """Re-run the real-weights demo in the adaptation's environment and compare with the claim."""
    res = run_command(
        [uv_binary(), "run", "--no-sync", "python", "demo.py", "--device", device],
        cwd=directory,
        env=model_run_env(project_env(directory), drop=("DRY_RUN",)),  # its own .venv, else its lock's
        timeout_s=timeout_s,
    )
    result = read_result(res.output)
    if not res.ok or result is None:
        return False, f"real-weights re-run failed (exit {res.exit_code}): {res.tail(2)}", {"tail": res.tail(20)}
    problems = []
    if result.get("ok") is not True:
        problems.append(f"re-run not ok: {result.get('error')}")
    if result.get("mode") != "pretrained":
        problems.append(f"re-run mode is {result.get('mode')!r}, not 'pretrained'")
    if result.get("device_used") != device or result.get("fallback"):
        problems.append(
            f"re-run used {result.get('device_used')} (requested {device}, fallback={result.get('fallback')})"
        )
    bad = outputs_problem(result.get("outputs"))
    if bad:
        problems.append(bad)
    shapes = {k: v.get("shape") for k, v in (result.get("outputs") or {}).items() if isinstance(v, dict)}
    claimed_shapes = {k: v.get("shape") for k, v in (claimed.get("outputs") or {}).items() if isinstance(v, dict)}
    if shapes != claimed_shapes:
        problems.append(f"outputs differ from the claim: {claimed_shapes} claimed, {shapes} re-run")
    return not problems, "; ".join(problems) or "real-weights re-run matches the claim", {"result": result}


def healing_gate(directory: Path, name: str, device: str, timeout_s: float) -> tuple[bool, str, dict[str, Any]]:
    """All checks; returns (passed, summary, report)."""
    directory = Path(directory)
    report: dict[str, Any] = {"checks": []}

    def check(name_: str, passed: bool, detail: str) -> bool:
        report["checks"].append({"name": name_, "passed": passed, "detail": detail})
        return passed

    evidence = read_evidence(directory)
    if not check(
        "evidence",
        evidence is not None,
        "healing_evidence.json present"
        if evidence
        else "no healing_evidence.json: the healer never reported a passing run",
    ):
        return False, report["checks"][-1]["detail"], report
    assert evidence is not None
    try:
        current = spec_digest(directory)
    except FileNotFoundError:
        current = ""
    check(
        "evidence_spec",
        evidence.get("spec_sha256") == current,
        "evidence belongs to the current adaptation.json"
        if evidence.get("spec_sha256") == current
        else "adaptation.json changed after the healer's passing run",
    )
    check(
        "evidence_device",
        evidence.get("device") == device,
        f"evidence is for device {evidence.get('device')}, the gate checks {device}",
    )
    stale = [f"{c['name']}: {c['detail']}" for c in report["checks"] if not c["passed"]]
    if stale:  # evidence for another spec or device: nothing to re-run against
        return False, "; ".join(stale), report
    passed, detail, checker_report = run_package_checker(name, directory.parent, device, timeout_s)
    report["check_adaptation"] = checker_report
    check("check_adaptation", passed, "all checks passed" if passed else detail)
    claimed = evidence.get("real_run")
    if claimed:
        ok, detail, extra = verify_real_run(directory, device, claimed, timeout_s)
        report["real_run"] = extra
        check("real_run", ok, detail)
    else:
        check("real_run", True, f"no real-weights run claimed ({evidence.get('real_weights_reason') or 'n/a'})")
    failed = [f"{c['name']}: {c['detail']}" for c in report["checks"] if not c["passed"]]
    passed_all = not failed
    summary = (
        f"{len(report['checks'])} checks passed" + (", real weights re-verified" if claimed else "")
        if passed_all
        else "; ".join(failed)
    )
    return passed_all, summary, report


@dataclass
class HealingReport(GateReport):
    """The healing gate's answer as the checker prints it: the device it checked and every check."""

    device: str = ""
    checks_run: list[dict[str, Any]] = field(default_factory=list)  # {name, passed, detail}, in order
    check_adaptation: dict[str, Any] | None = None  # the package checker's own report
    real_run: dict[str, Any] | None = None  # the real-weights re-run, when one was claimed

    def problem_lines(self) -> list[str]:
        return [f"{c['name']}: {c['detail']}" for c in self.checks_run if not c["passed"]]


def check_adaptation(directory: Path, device: str, timeout_s: float) -> HealingReport:
    """healing_gate as a GateReport, for the checker script (healing/scripts/check_healing.py)."""
    passed, summary, report = healing_gate(directory, directory.name, device, timeout_s)
    return HealingReport(
        directory.name,
        passed,
        summary,
        device=device,
        checks_run=report["checks"],
        check_adaptation=report.get("check_adaptation"),
        real_run=report.get("real_run"),
    )
