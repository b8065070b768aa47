"""The gate, for real: uv lock + uv sync --extra cpu + demo.py --dry-run on a tiny BERT, library
parity on its saved weights in the package's own environment, and the ways it must fail
(missing/tampered files, a demo that lies about its device, non-finite outputs, a package that
answers differently from transformers, a stale lock, bad names)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ascendbridge.package.generator import generate, render_adaptation
from ascendbridge.package.spec import AdaptationSpec
from tests.adaptation.helpers import tiny_bert_dir, tiny_bert_spec

pytestmark = pytest.mark.slow  # fast tier: the gate runs each generated adaptation in a real uv environment

CHECKER = Path(__file__).resolve().parents[2] / "adaptation" / "scripts" / "check_adaptation.py"
NAME = "tiny-bert"

# Appended to a copy's ab_runtime/demo.py: the run happens on the CPU, the RESULT line says NPU.
LYING_RUNTIME = """

_real_main = main


def main(argv):
    import builtins
    import json

    from ab_runtime.result import RESULT_MARKER

    real_print = builtins.print

    def lying_print(*args, **kwargs):
        if args and isinstance(args[0], str) and args[0].startswith(RESULT_MARKER):
            data = json.loads(args[0][len(RESULT_MARKER):])
            data.update(device_requested="npu", device_used="npu", device_name="Ascend910B")
            args = (RESULT_MARKER + json.dumps(data),) + args[1:]
        real_print(*args, **kwargs)

    builtins.print = lying_print
    return _real_main(argv)
"""


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One generated and locked adaptation; tests gate it or copies of it."""
    root = tmp_path_factory.mktemp("gate")
    directory = root / "adaptations" / NAME
    generation = generate(tiny_bert_spec(tiny_bert_dir(root)), directory)
    assert generation.ok, generation.lock.output if generation.lock else ""
    return directory


def copy_of(base: Path, tmp_path: Path) -> Path:
    """A copy under another adaptations dir (same name), without the environment."""
    target = tmp_path / "adaptations" / NAME
    shutil.copytree(base, target, ignore=shutil.ignore_patterns(".venv", "__pycache__"))
    return target


def synced_copy_of(base: Path, tmp_path: Path) -> Path:
    """A copy that keeps base's synced environment (hard links: no second torch install), so the
    gate's `uv sync --locked` finds it up to date; without one the gate syncs it itself."""
    target = copy_of(base, tmp_path)
    if (base / ".venv").is_dir():
        shutil.copytree(base / ".venv", target / ".venv", symlinks=True, copy_function=os.link)
    return target


def gate(directory: Path, *extra: str, name: str = NAME) -> tuple[int, dict, str]:
    proc = subprocess.run(
        [sys.executable, str(CHECKER), "--adapt", name, "--adaptations-dir", str(directory.parent), "--json", *extra],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc.returncode, json.loads(proc.stdout), proc.stderr


def checks(report: dict) -> dict[str, dict]:
    return {c["name"]: c for c in report["checks"]}


def test_gate_passes_a_generated_adaptation_by_running_it(base: Path) -> None:
    code, report, _ = gate(base)
    assert code == 0, report
    assert report["passed"] is True
    by_name = checks(report)
    for name in (
        "files",
        "spec",
        "runtime",
        "demo_wrapper",
        "pyproject",
        "lock",
        "sync",
        "demo_exit",
        "result_line",
        "result_ok",
        "mode",
        "identity",
        "device",
        "outputs",
    ):
        assert by_name[name]["passed"], by_name[name]
    result = report["result"]
    assert (result["device_requested"], result["device_used"], result["fallback"]) == ("cpu", "cpu", False)
    assert result["outputs"]["last_hidden_state"]["shape"] == [2, 16, 32]


def test_library_parity_runs_in_the_package_env_and_a_differing_package_fails(
    base: Path, tmp_path: Path, weighted_models: dict
) -> None:
    """With local weights and a tokenizer, the gate runs ab_runtime.parity in the package's own
    environment (transformers is a package dependency): the package's last_hidden_state equals the
    feature-extraction pipeline's. A config override the library does not apply makes the package
    answer differently from the model: library_parity fails and the gate exits 1."""
    directory = synced_copy_of(base, tmp_path)
    spec = AdaptationSpec.load(directory)
    spec.model.path, spec.model.has_weights = weighted_models["tiny-bert-classifier"]["path"], True
    render_adaptation(spec, directory)
    code, report, _ = gate(directory)
    parity = checks(report)["library_parity"]
    assert code == 0 and report["passed"], report
    assert parity["passed"] and parity["detail"].startswith(
        "transformers feature-extraction pipeline: equal within float32 tolerance (max abs err scaled "
    )
    assert parity["detail"].endswith(", 3 inputs)")

    spec.config_overrides = {"layer_norm_eps": 0.5}
    render_adaptation(spec, directory)
    code, report, _ = gate(directory)
    by_name = checks(report)
    assert code == 1 and report["passed"] is False
    assert by_name["demo_exit"]["passed"] and by_name["outputs"]["passed"]  # the dry run alone cannot tell
    assert not by_name["library_parity"]["passed"]
    assert "outputs differ from transformers feature-extraction pipeline" in by_name["library_parity"]["detail"]


def test_text_report_has_one_line_per_check(base: Path) -> None:
    proc = subprocess.run(
        [sys.executable, str(CHECKER), "--adapt", NAME, "--adaptations-dir", str(base.parent), "--no-run"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.strip().splitlines()
    assert lines[0].startswith("PASS files:") and any(ln.startswith("PASS lock:") for ln in lines)
    assert lines[-1] == f"adaptation {NAME} on cpu: PASSED"


def test_a_demo_that_lies_about_its_device_fails(base: Path, tmp_path: Path) -> None:
    directory = copy_of(base, tmp_path)
    runtime_demo = directory / "ab_runtime" / "demo.py"
    runtime_demo.write_text(runtime_demo.read_text() + LYING_RUNTIME)
    code, report, _ = gate(directory)
    assert code == 1 and report["passed"] is False
    by_name = checks(report)
    assert not by_name["runtime"]["passed"] and "modified: demo.py" in by_name["runtime"]["detail"]
    assert not by_name["device"]["passed"]
    assert "ran on npu" in by_name["device"]["detail"] and "requested cpu" in by_name["device"]["detail"]
    assert by_name["demo_exit"]["passed"]  # it exited 0: only the evidence gives it away


def test_non_finite_outputs_fail(base: Path, tmp_path: Path) -> None:
    directory = copy_of(base, tmp_path)
    spec = AdaptationSpec.load(directory)
    spec.config_overrides = {"initializer_range": 1e30}  # weights overflow fp32 -> nan/inf
    render_adaptation(spec, directory)
    code, report, _ = gate(directory)
    assert code == 1
    by_name = checks(report)
    assert not by_name["outputs"]["passed"] and "not finite" in by_name["outputs"]["detail"]
    assert not by_name["demo_exit"]["passed"] and not by_name["result_ok"]["passed"]
    assert by_name["device"]["passed"]  # the failure is the numbers, not the device


def test_a_stale_lock_fails_and_nothing_runs(base: Path, tmp_path: Path) -> None:
    directory = copy_of(base, tmp_path)
    spec = AdaptationSpec.load(directory)
    spec.dependencies["sentencepiece"] = ">=0.2"
    render_adaptation(spec, directory)  # pyproject changed, uv.lock not re-made
    code, report, _ = gate(directory)
    assert code == 1
    by_name = checks(report)
    assert not by_name["lock"]["passed"] and "uv lock --check failed" in by_name["lock"]["detail"]
    assert not by_name["run"]["passed"] and "sync" not in by_name
    assert not (directory / ".venv").exists()


def test_a_tampered_demo_and_pyproject_fail_statically(base: Path, tmp_path: Path) -> None:
    directory = copy_of(base, tmp_path)
    demo = directory / "demo.py"
    demo.write_text(demo.read_text() + "\nprint('ASCENDBRIDGE_RESULT {\"ok\": true}')\n")
    pyproject = directory / "pyproject.toml"
    pyproject.write_text(pyproject.read_text().replace('conflicts = [[{ extra = "ascend" }, ', "conflicts = [["))
    code, report, _ = gate(directory, "--no-run")
    assert code == 1
    by_name = checks(report)
    assert not by_name["demo_wrapper"]["passed"]
    assert not by_name["pyproject"]["passed"] and "not declared conflicting" in by_name["pyproject"]["detail"]


@pytest.mark.parametrize("missing", ["uv.lock", "demo.py", "ab_runtime/demo.py"])
def test_a_missing_file_is_bad_input(base: Path, tmp_path: Path, missing: str) -> None:
    directory = copy_of(base, tmp_path)
    (directory / missing).unlink()
    code, report, stderr = gate(directory, "--no-run")
    assert code == 2 and report["passed"] is False
    assert stderr.strip().splitlines()[-1] == f"error: adaptation '{NAME}' is missing {missing}"


@pytest.mark.parametrize(
    "content, message",
    [("{not json", "corrupt adaptation.json"), ('{"name": "tiny-bert"}', "corrupt adaptation.json: model")],
)
def test_a_corrupt_spec_is_bad_input(base: Path, tmp_path: Path, content: str, message: str) -> None:
    directory = copy_of(base, tmp_path)
    (directory / "adaptation.json").write_text(content)
    code, _, stderr = gate(directory, "--no-run")
    assert code == 2 and stderr.strip().splitlines()[-1].startswith(f"error: {message}")


@pytest.mark.parametrize(
    "name, message",
    [
        ("../tiny-bert", "invalid adaptation name"),
        ("TINY;rm -rf", "invalid adaptation name"),
        ("/etc", "invalid adaptation name"),
        ("no-such-model", "unknown adaptation 'no-such-model'"),
    ],
)
def test_bad_names_are_one_line_errors(base: Path, name: str, message: str) -> None:
    code, report, stderr = gate(base, "--no-run", name=name)
    assert code == 2 and message in report["error"]
    assert stderr.strip().splitlines() == [f"error: {report['error']}"]


@pytest.mark.parametrize("args", [["--adapt", NAME, "--device", "tpu"], [], ["--adapt", NAME, "--timeout", "x"]])
def test_usage_mistakes_are_one_line_errors(args: list[str]) -> None:
    proc = subprocess.run([sys.executable, str(CHECKER), *args], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and proc.stdout == ""
    assert len(proc.stderr.strip().splitlines()) == 1 and proc.stderr.startswith("error: ")
