"""healing/scripts/check_healing.py as a person runs it (a real process): the healing gate's verdict
with the common checker command line, exit 1 on a failed gate and 2 on bad usage. Its pass on a
really healed package is in test_healing_e2e.py (slow: a uv environment and demo runs)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from ascendbridge.package.spec import AdaptationSpec, ModelSource
from healing.evidence import write_evidence

CHECKER = Path(__file__).resolve().parents[2] / "healing" / "scripts" / "check_healing.py"


def check_healing(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(CHECKER), *args], capture_output=True, text=True, env=dict(os.environ), timeout=300
    )


def _spec_only(root: Path) -> Path:
    directory = root / "half-rendered"
    directory.mkdir()
    AdaptationSpec(
        name="half-rendered", model=ModelSource(model_id="org/m"), task_family="causal_lm", model_class="X"
    ).save(directory)
    return directory


def test_no_evidence_and_evidence_for_another_device_fail_with_exit_1(tmp_path: Path) -> None:
    directory = _spec_only(tmp_path)
    none = check_healing("--adaptation-dir", str(directory), "--device", "cpu")
    assert none.returncode == 1 and "FAIL: no healing_evidence.json" in none.stdout

    write_evidence(directory, {"device": "npu", "dry_run": {"ok": True}, "real_run": None})
    other = check_healing("--adaptation-dir", str(directory), "--device", "cpu", "--json")
    assert other.returncode == 1
    report = json.loads(other.stdout)
    assert report["passed"] is False and report["device"] == "cpu"
    assert [c["name"] for c in report["checks_run"] if not c["passed"]] == ["evidence_device"]


def test_the_package_checker_runs_when_the_evidence_fits(tmp_path: Path) -> None:
    directory = _spec_only(tmp_path)
    write_evidence(directory, {"device": "cpu", "dry_run": {"ok": True}, "real_run": None})
    run = check_healing("--adaptation-dir", str(directory), "--device", "cpu", "--json")
    assert run.returncode == 1
    report = json.loads(run.stdout)
    failed = {c["name"]: c["detail"] for c in report["checks_run"] if not c["passed"]}
    assert list(failed) == ["check_adaptation"] and report["check_adaptation"] is not None


def test_bad_usage_is_one_line_and_exit_2(tmp_path: Path) -> None:
    directory = _spec_only(tmp_path)
    bad_device = check_healing("--adaptation-dir", str(directory), "--device", "tpu")
    assert bad_device.returncode == 2 and "unknown device" in bad_device.stderr
    assert len(bad_device.stderr.strip().splitlines()) == 1
    missing = check_healing("--adaptation-dir", str(tmp_path / "nowhere"))
    assert missing.returncode == 2 and missing.stderr.startswith("error: no adaptation directory")
