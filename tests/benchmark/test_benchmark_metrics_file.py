"""The metrics file's one reader (ab_runtime/metrics_file.py): a typed record, one-line refusals."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from ab_runtime.metrics_file import METRICS_SCHEMA, EvidenceError, evidence_names, find_metrics, read_metrics


def metrics_body(**changes: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "schema": METRICS_SCHEMA,
        "run": {"device": "cpu", "dtype": "float32", "mode": "dry_run", "dataset": "synthetic", "device_name": "x86"},
        "timing": {"median_ms": 2.0, "p90_ms": 3, "min_ms": 1.5},
        "reference_timing": {"median_ms": 4.0},
        "throughput": {"samples_per_s": 500.0},
        "accuracy": {"verdict": "pass", "outputs": {"logits": {"kind": "float"}}},
        "evidence": {"trace": "trace_cpu_float32_dry_run_synthetic.json", "outputs": "../escape.pt"},
    }
    body.update(changes)
    return body


def test_a_metrics_file_reads_as_a_typed_record(tmp_path: Path) -> None:
    names = evidence_names("benchmark", "cpu", "float32", "dry_run", "synthetic")
    path = tmp_path / names["metrics"]
    path.write_text(json.dumps(metrics_body()))
    (found,) = find_metrics(tmp_path)
    assert found == read_metrics(path)
    assert (found.run.device, found.run.device_name, found.label) == ("cpu", "x86", "cpu/float32/dry_run/synthetic")
    assert (found.median_ms, found.p90_ms, found.reference_median_ms, found.verdict) == (2.0, 3.0, 4.0, "pass")
    assert isinstance(found.p90_ms, float) and found.outputs == {"logits": {"kind": "float"}}
    assert found.named("trace") == tmp_path / names["trace"] and found.named("outputs") is None  # not a plain name


def test_the_benchmark_and_the_perf_run_have_their_own_names(tmp_path: Path) -> None:
    bench = evidence_names("benchmark", "npu", "bfloat16", "pretrained", "synthetic")
    perf = evidence_names("perf", "npu", "bfloat16", "pretrained", "synthetic")
    assert bench == {
        "outputs": "outputs_npu_bfloat16_pretrained_synthetic.pt",
        "trace": "trace_npu_bfloat16_pretrained_synthetic.json",
        "metrics": "benchmark_metrics_npu_bfloat16_pretrained_synthetic.json",
    }
    assert perf["metrics"] == "perf_metrics_npu_bfloat16_pretrained_synthetic.json"
    (tmp_path / perf["metrics"]).write_text(json.dumps(metrics_body()))
    assert find_metrics(tmp_path) == [] and len(find_metrics(tmp_path, "perf")) == 1
    with pytest.raises(EvidenceError, match="not a valid evidence name part"):
        evidence_names("benchmark", "../cpu", "float32", "dry_run", "synthetic")
    with pytest.raises(EvidenceError, match="unknown run kind"):
        evidence_names("serving", "cpu", "float32", "dry_run", "synthetic")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{truncated", "m.json: not valid JSON (JSONDecodeError)"),
        (json.dumps({"schema": "other/1"}), f"m.json: not a metrics file (schema != {METRICS_SCHEMA})"),
        (json.dumps(metrics_body(run={"device": "cpu"})), "m.json: run.dtype is missing or not a str"),
        (json.dumps(metrics_body(timing={"median_ms": True})), "m.json: timing.median_ms is missing or not a float"),
        (json.dumps(metrics_body(accuracy={"verdict": "pass"})), "m.json: accuracy.outputs is missing or not a dict"),
    ],
)
def test_a_malformed_file_is_one_line_naming_the_field(tmp_path: Path, text: str, message: str) -> None:
    (tmp_path / "m.json").write_text(text)
    with pytest.raises(EvidenceError) as refused:
        read_metrics(tmp_path / "m.json")
    assert str(refused.value).startswith(message) and "\n" not in str(refused.value)


def test_a_missing_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(EvidenceError, match=r"^gone.json: file not found$"):
        read_metrics(tmp_path / "gone.json")


def _export(root: Path, body: dict[str, Any]) -> Path:
    """A package folder as scripts/package_adaptations.py exports it: its runtime, one metrics file,
    check_package.py and a manifest of every file."""
    from ascendbridge.config import RUNTIME_DIR
    from ascendbridge.export import check_package

    shutil.copytree(RUNTIME_DIR, root / "ab_runtime", ignore=shutil.ignore_patterns("__pycache__"))
    (root / evidence_names("benchmark", "cpu", "float32", "dry_run", "synthetic")["metrics"]).write_text(
        json.dumps(body)
    )
    shutil.copyfile(check_package.__file__, root / check_package.SELF)
    files = {rel: check_package.sha256(root / rel) for rel in check_package.package_files(root)}
    results = check_package.results_from_evidence(root) if body.get("accuracy") else []
    stack = {"stack_id": "s1", "data": {"torch": "2.13.0"}}
    (root / check_package.MANIFEST).write_text(
        json.dumps({"results": results, "optimization": None, "stack": stack, "files": files})
    )
    return root / check_package.SELF


def test_an_exported_package_reads_its_evidence_with_its_own_copy_of_the_reader(tmp_path: Path) -> None:
    bare = [sys.base_prefix + "/bin/python3", "-I"]  # isolated: the standard library and the export only
    ok = subprocess.run([*bare, str(_export(tmp_path / "good", metrics_body()))], capture_output=True, text=True)
    assert ok.returncode == 0 and ok.stdout.startswith("PASS good:"), ok.stdout + ok.stderr
    bad = subprocess.run(
        [*bare, str(_export(tmp_path / "bad", metrics_body(accuracy=None)))], capture_output=True, text=True
    )
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1, bad.stderr
    assert "accuracy.verdict is missing" in bad.stderr and "Traceback" not in bad.stderr


def test_an_exported_packages_optimization_result_is_read_with_its_own_notes_reader(tmp_path: Path) -> None:
    """The export's optimization result comes from optimization_notes.json through the package's copy
    of the notes' one reader (ab_runtime/optimize/notes_file.py); a file that is not a notes document
    is refused in one line."""
    from ab_runtime.optimize.notes_file import NOTES_FILE, NOTES_SCHEMA, TOP_KEYS
    from ascendbridge.export import check_package

    root = tmp_path / "optimized"
    root.mkdir()
    final = {"speedup": 1.5, "outcome": "gain", "passes": ["cpu_bf16_cast"]}
    (root / NOTES_FILE).write_text(json.dumps({"schema": NOTES_SCHEMA, **dict.fromkeys(TOP_KEYS), "final": final}))
    script = _export(root, metrics_body())
    manifest = json.loads((root / check_package.MANIFEST).read_text())
    manifest["optimization"] = {"speedup": 1.5, "outcome": "gain"}
    (root / check_package.MANIFEST).write_text(json.dumps(manifest))
    bare = [sys.base_prefix + "/bin/python3", "-I"]
    ok = subprocess.run([*bare, str(script)], capture_output=True, text=True)
    assert ok.returncode == 0 and ok.stdout.startswith("PASS optimized:"), ok.stdout + ok.stderr
    (root / NOTES_FILE).write_text("[]")
    manifest["files"][NOTES_FILE] = check_package.sha256(root / NOTES_FILE)
    (root / check_package.MANIFEST).write_text(json.dumps(manifest))
    bad = subprocess.run([*bare, str(script)], capture_output=True, text=True)
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "Traceback" not in bad.stderr, bad.stderr
    assert f"{NOTES_FILE}: not an optimization notes document" in bad.stderr
