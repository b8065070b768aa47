"""Every CLI answers an input error the same way (ascendbridge/cli_errors.py): exit 2 and exactly
one `error:` line on stderr, never a traceback. Each CLI runs as a real process on a bad input."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ascendbridge.config import REPO_ROOT

pytestmark = pytest.mark.slow  # every case runs a real CLI process (24 of them)

# (command after the interpreter, bad arguments): a flag nobody has, a file that is not there, a
# name that is not an adaptation, a value outside its range.
CASES: list[tuple[list[str], list[str]]] = [
    (["scripts/board_ops.py"], ["--no-such-flag"]),
    (["scripts/board_ops.py"], ["status", "--stage", "nowhere"]),
    (["scripts/get_model_info.py"], ["--no-such-flag"]),
    (["scripts/discover_models.py"], ["--no-such-flag"]),
    (["scripts/env_probe.py"], ["--adapt", "No Such Adaptation"]),
    (["scripts/make_demo_models.py"], ["--no-such-flag"]),
    (["scripts/package_adaptations.py"], ["--no-such-flag"]),
    (["scripts/progress_table.py"], ["--no-such-flag"]),
    (["scripts/run_completed_adaptations.py"], ["--no-such-flag"]),
    (["scripts/wheelhouse.py"], ["--for", "tpu"]),
    (["scripts/op_coverage.py"], ["build-table", "--wheel", "/no/such/torch_npu.whl"]),
    (["scripts/dashboard.py"], ["--port", "0"]),
    (["-m", "dashboard"], ["--port", "99999"]),
    (["-m", "ascendbridge.teamlead"], ["--no-such-flag"]),
    (["-m", "healing"], ["--no-such-flag"]),
    (["adaptation/scripts/check_adaptation.py"], ["--adapt", "../escape"]),
    (["benchmark/scripts/check_accuracy_run.py"], ["--adaptation-dir", "/no/such/dir"]),
    (["benchmark/scripts/benchmark_tool.py"], ["hotspots", "/no/such/trace.json"]),
    (["business_benchmark/scripts/check_business_benchmark.py"], ["--adapt", "no-such-adaptation"]),
    (["business_benchmark/scripts/business_tool.py"], ["compare", "/no/such/a.json", "/no/such/b.json"]),
    (["business_benchmark/scripts/dataset_mapping.py"], ["--no-such-flag"]),
    (["business_benchmark/scripts/download_datasets.py"], ["--no-such-flag"]),
    (["business_benchmark/scripts/make_bundled_sets.py"], ["--no-such-flag"]),
    (["serving/scripts/check_serving.py"], ["--adapt", "no-such-adaptation"]),
    (["training/scripts/check_training.py"], ["--adapt", "no-such-adaptation"]),
    (["training/scripts/loss_curve.py"], ["--out", "/no/such/run"]),
    (["training/scripts/host_acceptance.py"], ["--adapt", "no-such-adaptation"]),
    (["-m", "serving.env"], ["--no-such-flag"]),
    (["optimization/scripts/check_accuracy_run_perf.py"], ["--adaptation-dir", ".", "--pairs", "1"]),
    (["optimization/scripts/check_optimization_notes.py"], ["--adapt", "no-such-adaptation"]),
    (["optimization/scripts/optimization_tool.py"], ["compare", "/no/such/a", "/no/such/b"]),
    (["ascendbridge/export/check_package.py"], ["--no-such-flag"]),  # an exported package's own check
]


def run_cli(command: list[str], args: list[str], tmp_path: Path) -> subprocess.CompletedProcess[str]:
    env = dict(
        os.environ,
        ASCENDBRIDGE_BOARD=str(tmp_path / "board.db"),
        ASCENDBRIDGE_ADAPTATIONS=str(tmp_path / "adaptations"),
        ASCENDBRIDGE_LOGS=str(tmp_path / "logs"),
    )
    (tmp_path / "adaptations").mkdir(exist_ok=True)
    return subprocess.run(
        [sys.executable, *command, *args], cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=120
    )


def assert_one_line_input_error(proc: subprocess.CompletedProcess[str]) -> None:
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2, (proc.returncode, proc.stderr[-2000:])
    assert len(lines) == 1 and lines[0].startswith("error: "), proc.stderr[-2000:]
    assert "Traceback" not in proc.stdout + proc.stderr


@pytest.mark.parametrize(("command", "args"), CASES, ids=lambda v: " ".join(v))
def test_bad_input_is_one_line_and_exit_2(command: list[str], args: list[str], tmp_path: Path) -> None:
    assert_one_line_input_error(run_cli(command, args, tmp_path))


def test_optimization_compare_refuses_notes_without_passes(tmp_path: Path) -> None:
    """A notes file with the right schema but no `passes`: refused in one line, not a KeyError."""
    notes = tmp_path / "notes.json"
    notes.write_text(json.dumps({"schema": "ascendbridge.optimization_notes/1", "adaptation": "x", "final": {}}))
    proc = run_cli(["optimization/scripts/optimization_tool.py"], ["compare", str(notes), str(notes)], tmp_path)
    assert_one_line_input_error(proc)
    assert "passes" in proc.stderr


def test_business_compare_refuses_empty_objects(tmp_path: Path) -> None:
    """`business_tool compare {} {}`: two JSON objects that are not business evidence are refused."""
    empty = tmp_path / "empty.json"
    empty.write_text("{}")
    proc = run_cli(["business_benchmark/scripts/business_tool.py"], ["compare", str(empty), str(empty)], tmp_path)
    assert_one_line_input_error(proc)
    assert "not a business metrics file" in proc.stderr
    literal = run_cli(["business_benchmark/scripts/business_tool.py"], ["compare", "{}", "{}"], tmp_path)
    assert_one_line_input_error(literal)


def test_an_exports_check_all_answers_help_and_refuses_what_it_does_not_take(tmp_path: Path) -> None:
    """check_all.py sits at the top of an export (scripts/package_adaptations.py): `--help` is its
    usage, not a package path; an unknown argument, or a folder with no package, is one line."""
    from scripts.package_adaptations import CHECK_ALL

    script = tmp_path / "check_all.py"
    script.write_text(CHECK_ALL)
    helped = subprocess.run([sys.executable, str(script), "--help"], capture_output=True, text=True, timeout=60)
    assert helped.returncode == 0 and "python3 check_all.py [--run]" in helped.stdout
    assert_one_line_input_error(run_cli([str(script)], ["--bogus"], tmp_path))
    assert_one_line_input_error(run_cli([str(script)], [], tmp_path))  # no package beside it
