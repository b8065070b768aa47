"""Stacks: system mode on the shared CPU torch, a mismatched stack refused, re-validation verdicts.

Real components throughout: the shared CPU torch env as the "preinstalled" interpreter, real
venvs, a real team lead on a real board. The simulated stack change is a slowed torch runtime
(tests/stacks/stack_support.py); baselines are controlled board figures, so the verdicts do
not depend on this machine's load.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import tomllib

from ascendbridge.board import BoardError, BoardStore
from ascendbridge.board.records import Registration
from ascendbridge.config import uv_binary
from ascendbridge.envmode import EnvChoice
from ascendbridge.package import system_env, uv_env
from ascendbridge.package.spec import AdaptationSpec
from ascendbridge.package.stack import StackMismatch, check_stack
from ascendbridge.revalidation.compare import compare
from ascendbridge.stages import STAGES
from bench.support.tiny_adaptations import make_adaptation
from bench.support.torch_env import torch_env_python
from tests.stacks.stack_support import slowed_stack

pytestmark = pytest.mark.slow  # fast tier: builds real stack environments

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "run_completed_adaptations.py"
EXPORTER = REPO / "scripts" / "package_adaptations.py"
BASELINE_MS = 400.0


def test_compatibility_table_pairs_torch_npu_with_torch() -> None:
    spec_range = "transformers>=4.46"
    check_stack({"torch": "2.7.1+cpu", "torch_npu": "2.7.1.post2", "transformers": "4.57.1"}, spec_range, "npu")
    for stack, device, words in (
        (
            {"torch": "2.9.1", "torch_npu": "2.7.1.post2", "transformers": "4.57.1"},
            "npu",
            "torch_npu 2.7.1.post2 needs torch 2.7.1",
        ),
        ({"torch": "2.13.0+cpu", "torch_npu": None, "transformers": "5.24.0"}, "npu", "needs torch_npu"),
        ({"torch": "2.13.0+cpu", "transformers": "4.30.0"}, "cpu", "outside the spec's 'transformers>=4.46'"),
        ({"torch": None, "executable": "/usr/bin/python3"}, "cpu", "has no torch"),
    ):
        with pytest.raises(StackMismatch, match=words):
            check_stack(stack, spec_range, device)


def test_compare_rule_tolerance_and_accuracy() -> None:
    base = {"float32": {"median_ms": 10.0, "samples_per_s": 100.0, "accuracy_pass": 1.0, "stack_id": "old"}}
    same = compare("m", "m", base, {"float32": {"median_ms": 10.4, "samples_per_s": 97.0, "accuracy_pass": 1.0}})
    slow = compare("m", "m", base, {"float32": {"median_ms": 10.0, "samples_per_s": 90.0, "accuracy_pass": 1.0}})
    fast = compare("m", "m", base, {"float32": {"median_ms": 8.0, "samples_per_s": 125.0, "accuracy_pass": 1.0}})
    wrong = compare("m", "m", base, {"float32": {"median_ms": 10.0, "samples_per_s": 100.0, "accuracy_pass": 0.0}})
    gone = compare("m", "m", base, {})
    assert [v.verdict for v in (same, slow, fast, wrong, gone)] == [
        "unchanged",
        "regressed",
        "improved",
        "regressed",
        "broken",
    ]
    assert slow.worst.name == "samples_per_s" and slow.worst.worse_by() == pytest.approx(100 / 90 - 1)
    assert "accuracy no longer passes" in wrong.summary


def test_compare_judges_the_fastest_call_where_both_runs_recorded_it() -> None:
    """Load only adds time: a median a loaded re-run moved is no regression while its fastest call
    holds; a fastest call slower than the tolerance is one, whatever the median says."""
    base = {"float32": {"median_ms": 2.157, "min_ms": 2.071, "samples_per_s": 927.0, "accuracy_pass": 1.0}}
    noisy = {"float32": {"median_ms": 2.334, "min_ms": 2.104, "samples_per_s": 856.8, "accuracy_pass": 1.0}}
    slower = {"float32": {"median_ms": 2.16, "min_ms": 2.4, "samples_per_s": 926.0, "accuracy_pass": 1.0}}
    held, lost = compare("m", "m", base, noisy), compare("m", "m", base, slower)
    assert (held.verdict, [c.name for c in held.changes]) == ("unchanged", ["min_ms"]), held.summary
    assert held.summary == "within 5% (largest change 1.6%)"
    assert lost.verdict == "regressed" and lost.summary == "float32 min_ms +15.9% worse (2.071 -> 2.4)"
    older = {"float32": {k: v for k, v in base["float32"].items() if k != "min_ms"}}  # recorded before min_ms
    assert compare("m", "m", older, noisy).verdict == "regressed"  # by its median, as before


def test_system_mode_refuses_a_mismatched_stack_in_one_line(tmp_path: Path) -> None:
    directory = make_adaptation(tmp_path, "tiny-bert")
    spec = AdaptationSpec.load(directory)
    spec.transformers_requirement = "transformers<4"
    (directory / "adaptation.json").write_text(spec.to_json())
    result = uv_env.sync(directory, "cpu", env=EnvChoice("system", torch_env_python()))
    assert not result.ok and result.exit_code == 2
    lines = result.output.strip().splitlines()
    assert (
        len(lines) == 1
        and lines[0].startswith("error: transformers ")
        and "outside the spec's 'transformers<4'" in lines[0]
    )
    assert not (directory / ".venv").exists()  # refused before anything was made or installed


def test_an_unlocked_package_is_checked_against_its_own_dependencies_on_a_host_with_uv(tmp_path: Path) -> None:
    """bench/accelerator_check renders packages without locking them; the CUDA image has uv, and
    `uv export --frozen` of a package with no lock failed there before any model ran."""
    directory = make_adaptation(tmp_path, "tiny-bert")
    assert uv_binary() and not (directory / "uv.lock").exists()
    declared = tomllib.loads((directory / "pyproject.toml").read_text())["project"]["dependencies"]
    unlocked = system_env.pinned_requirements(directory)
    assert unlocked and {str(r) for r in unlocked} <= set(declared)
    assert uv_env.lock(directory).ok
    locked = system_env.pinned_requirements(directory)
    assert locked and all(str(r.specifier).startswith("==") for r in locked)  # the lock's pins once there is one


def _completed_through_benchmark(store: BoardStore, model_id: str, benchmark_figures: list[dict]) -> None:
    """Controlled board state: every stage up to Benchmark completed (their gates are other tests'),
    the Benchmark completion carrying the controlled baseline figures."""
    for stage in STAGES[: STAGES.index("benchmark") + 1]:
        if stage == "training":  # skipped by policy: no training job
            continue
        task = next(t for t in store.list_tasks(model_id=model_id) if t.stage == stage)
        claimed = store.claim_task(task.id, "test", 60)
        store.complete_task(
            task.id,
            claimed.fencing_token,
            {"summary": "controlled baseline"},
            origin="test",
            figures=benchmark_figures if stage == "benchmark" else (),
        )


@pytest.fixture(scope="module")
def revalidated(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, subprocess.CompletedProcess[str]]:
    """Two completed adaptations with controlled baselines (300 ms), each on a board-assigned
    system stack: one as fast as its baseline, one slowed to twice the time; re-validated once."""
    tmp_path = tmp_path_factory.mktemp("revalidation")
    torch_python = torch_env_python()
    same_speed = slowed_stack(tmp_path / "stack-same", torch_python, BASELINE_MS / 1000)
    half_speed = slowed_stack(tmp_path / "stack-slower", torch_python, 2 * BASELINE_MS / 1000)
    store = BoardStore.init(tmp_path / "board.db")
    old_stack = {
        "stack_id": "0ldstack0000",
        "data": {"python": "3.11", "torch": "2.12.0+cpu", "transformers": "5.20.0"},
    }
    for name, python in (("tiny-bert", same_speed), ("tiny-vit", half_speed)):
        directory = make_adaptation(tmp_path, name)
        assert uv_env.lock(directory).ok
        model_dir = AdaptationSpec.load(directory).model.path
        store.register_models([Registration(model_id=name, source="local", path=model_dir)])
        _completed_through_benchmark(
            store,
            name,
            [
                {
                    "values": {"median_ms": BASELINE_MS, "accuracy_pass": 1.0},
                    "device": "cpu",
                    "dtype": "float32",
                    "units": {"median_ms": "ms"},
                    "stack": old_stack,
                }
            ],
        )
        store.set_env_mode(name, "system", str(python))  # per model on the board
    store.close()
    proc = subprocess.run(
        [
            sys.executable,
            str(SCRIPT),
            "--board",
            str(tmp_path / "board.db"),
            "--adaptations-dir",
            str(tmp_path / "adaptations"),
            "--iters",
            "3",
            "--warmup",
            "1",
            "--workers",
            "2",
            "--out",
            str(tmp_path / "report"),
        ],
        capture_output=True,
        text=True,
        timeout=900,
    )
    return tmp_path, proc


def test_revalidation_after_a_stack_change_reports_unchanged_and_regressed(
    revalidated: tuple[Path, subprocess.CompletedProcess[str]],
) -> None:
    tmp_path, proc = revalidated
    out = tmp_path / "report"
    assert proc.returncode == 1, proc.stdout + proc.stderr
    report = json.loads((out / "revalidation.json").read_text())
    verdicts = {p["adaptation"]: p for p in report["packages"]}
    assert verdicts["tiny-bert"]["verdict"] == "unchanged", verdicts
    slower = verdicts["tiny-vit"]
    assert slower["verdict"] == "regressed", verdicts
    change = slower["changes"][0]
    assert change["name"] == "median_ms" and change["baseline"] == BASELINE_MS
    assert change["worse_by"] == pytest.approx(change["current"] / BASELINE_MS - 1, abs=1e-4)
    assert 0.9 < change["worse_by"] < 1.3  # the slowed runtime doubled the forward time
    row = next(line for line in (out / "revalidation.md").read_text().splitlines() if line.startswith("| `tiny-vit` |"))
    shown = float(re.search(r"\| regressed \| ([+-][0-9.]+)% \|", row).group(1)) / 100  # rounded to 0.1 %
    assert shown == pytest.approx(change["worse_by"], abs=0.0006), row
    assert (out / "revalidation.png").stat().st_size > 1000
    # the re-run's figures name the stack they ran on: the shared CPU torch, seen by a system venv
    stack = report["stack_detail"]
    assert stack["torch"].startswith("2.13.0") and slower["current_stack"] != "0ldstack0000"
    assert slower["baseline_stack"] == "0ldstack0000"
    copy = out / "adaptations" / "tiny-vit"
    marker = json.loads((copy / ".venv" / "ascendbridge-env.json").read_text())
    assert marker["mode"] == "system" and not any(r.startswith("torch") for r in marker["installed"])
    assert not list((copy / ".venv").glob("lib/python*/site-packages/torch"))  # uv installed no torch
    # recorded on the main board; the original package was not touched
    with BoardStore(tmp_path / "board.db") as main:
        events = main.events_of_kind("revalidation")
    assert sorted(e.data["verdict"] for e in events) == ["regressed", "unchanged"]
    assert not (tmp_path / "adaptations" / "tiny-vit" / ".venv").exists()


def test_exported_package_is_reverified_from_the_export_alone(
    revalidated: tuple[Path, subprocess.CompletedProcess[str]], tmp_path: Path
) -> None:
    """Export the re-validated packages (their board names the stack), move the export away from
    the repository and check it with a bare interpreter: no framework, no board."""
    source, _ = revalidated
    export = tmp_path / "export"
    proc = subprocess.run(
        [
            sys.executable,
            str(EXPORTER),
            "--board",
            str(source / "report" / "revalidation.db"),
            "--adaptations-dir",
            str(source / "report" / "adaptations"),
            "--out",
            str(export),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    moved = tmp_path / "elsewhere"
    shutil.move(str(export), moved)
    readme = (moved / "README.md").read_text()
    manifest = json.loads((moved / "tiny-vit" / "manifest.json").read_text())
    assert manifest["stack"]["data"]["torch"].startswith("2.13.0") and manifest["stack"]["stack_id"] in readme
    assert f"{manifest['results'][0]['median_ms']:.3f}" in readme
    assert "benchmark_metrics_cpu_float32_dry_run_synthetic.json" in manifest["files"]
    bare = [sys.base_prefix + "/bin/python3", "-I"]  # isolated: only the standard library and the export
    ok = subprocess.run([*bare, str(moved / "check_all.py")], cwd=tmp_path, capture_output=True, text=True)
    assert ok.returncode == 0 and ok.stdout.count("PASS") == 2, ok.stdout + ok.stderr
    evidence = moved / "tiny-vit" / "benchmark_metrics_cpu_float32_dry_run_synthetic.json"
    evidence.write_text(evidence.read_text().replace('"verdict": "pass"', '"verdict": "fail"', 1))
    bad = subprocess.run([*bare, str(moved / "tiny-vit" / "check_package.py")], capture_output=True, text=True)
    assert bad.returncode == 1
    assert bad.stdout.strip() == (
        "FAIL tiny-vit: benchmark_metrics_cpu_float32_dry_run_synthetic.json: sha256 differs from the manifest"
    )


def test_team_lead_refuses_system_mode_without_an_interpreter(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from ascendbridge.envmode import ENV_MODE_VAR, SYSTEM_PYTHON_VAR
    from ascendbridge.teamlead.cli import main as team_lead

    monkeypatch.setenv(ENV_MODE_VAR, "locked")
    monkeypatch.setenv(SYSTEM_PYTHON_VAR, "")
    board = str(tmp_path / "board.db")
    assert team_lead(["--once", "--board", board, "--env", "system"]) == 2
    assert capsys.readouterr().err.strip().splitlines() == [
        "error: environment mode 'system' needs an interpreter (--python PATH or ASCENDBRIDGE_SYSTEM_PYTHON)"
    ]
    assert team_lead(["--once", "--board", board, "--env", "system", "--python", str(tmp_path / "nope")]) == 2
    assert "does not exist or is not executable" in capsys.readouterr().err
    assert not (tmp_path / "board.db").exists()  # refused before the board was opened


def test_old_board_upgrades_to_stacks_and_metrics_name_their_stack(tmp_path: Path) -> None:
    """A v1 board gains the v3 columns and table in place; a figure then names its stack."""
    from tests.board.test_board_migration import make_v1_board

    path = tmp_path / "old.db"
    make_v1_board(path)
    stack = {"stack_id": "abc123abc123", "data": {"python": "3.11.7", "torch": "2.13.0+cpu"}}
    with BoardStore(path) as store:
        assert store.get_model("org/old-model").env_mode == ""
        for median in (2.0, 2.1):  # two gated completions on one stack: the stack is stored once
            task = store.claim_next("test", 60)
            store.complete_task(
                task.id, task.fencing_token, {}, figures=[{"values": {"median_ms": median}, "stack": stack}]
            )
        assert [m.stack_id for m in store.list_metrics("org/old-model")] == ["abc123abc123"] * 2
        assert store.list_stacks() == {"abc123abc123": stack["data"]}
        record = store.set_env_mode("org/old-model", "system", "/opt/vendor/bin/python")
        assert (record.env_mode, record.env_python) == ("system", "/opt/vendor/bin/python")
        with pytest.raises(BoardError, match="needs the interpreter"):
            store.set_env_mode("org/old-model", "system")
