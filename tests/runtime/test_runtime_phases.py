"""The phases of a process's time (ab_runtime/phases.py): innermost phase wins, so the phases never
sum past the wall time; a runtime script's RESULT line carries them to the framework."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from ab_runtime import phases
from ab_runtime.result import read_result

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def fresh() -> Iterator[None]:
    phases.take()
    yield
    phases.take()


def test_nested_phases_charge_the_innermost_and_never_exceed_the_wall_time() -> None:
    start = time.perf_counter()
    with phases.phase("measurement"):
        time.sleep(0.05)
        with phases.phase("warmup"):
            time.sleep(0.05)
        phases.add_reported({"compile": 0.02})  # a child's phase, run inside this one
    wall = time.perf_counter() - start
    spent = phases.take()
    assert set(spent) == {"measurement", "warmup", "compile"}
    assert spent["warmup"] >= 0.05 and spent["measurement"] >= 0.03
    assert sum(spent.values()) <= wall + 0.002  # rounding to the millisecond
    assert phases.snapshot() == {}  # taken once


def test_a_childs_malformed_or_unknown_phases_are_ignored() -> None:
    phases.add_reported({"compile": 1.5, "bogus": 2.0, "gate": float("nan"), "warmup": -1, "model_load": True})
    phases.add_reported(["compile", 3.0])
    assert phases.take() == {"compile": 1.5}


def test_a_runtime_scripts_result_line_carries_its_phases() -> None:
    code = (
        "import sys, time\n"
        "from ab_runtime import phases\n"
        "from ab_runtime.result import run_main\n"
        "def run():\n"
        "    with phases.phase('model_load'):\n"
        "        time.sleep(0.1)\n"
        "    return {'ok': True}\n"
        "sys.exit(run_main(run))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    result = read_result(proc.stdout)
    assert result is not None and result["ok"] is True
    reported = result["phases"]
    assert reported["model_load"] >= 0.1
    if sys.platform.startswith("linux"):  # the kernel's start time of the process
        assert reported["process_start"] > 0
    phases.add_reported(reported)  # what the framework does with it (ascendbridge/package/uv_env.py)
    assert phases.take() == reported
