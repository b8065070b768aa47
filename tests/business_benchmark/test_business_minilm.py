"""Real weights end to end: all-MiniLM-L6-v2 through the embedding business benchmark, and the gate."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from business_benchmark.evidence import AGREEMENT_ONLY, WITH_TASK_SCORES, build_evidence
from business_benchmark.gate import check_adaptation
from business_benchmark.pass_rule import PassRule
from tests.business_benchmark.business_support import load


def _copy(directory: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(directory, tmp_path / directory.name))


def test_minilm_task_scores_bf16_vs_fp32_and_gate_passes(minilm: tuple[Path, Path], python: Path) -> None:
    directory, metrics_path = minilm
    evidence = load(metrics_path)
    assert evidence["weights"] == "real" and evidence["scores"] == WITH_TASK_SCORES != AGREEMENT_ONLY
    assert (evidence["run"]["device"], evidence["run"]["dtype"]) == ("cpu", "bfloat16")
    assert (
        evidence["run"]["reference"] == {"device": "cpu", "dtype": "float32"}
        and evidence["run"]["tokenizer"] == "model"
    )
    by_set = {ev["set"]: ev for ev in evidence["evaluations"]}
    retrieval, sts = by_set["ab-retrieval-en"]["metrics"], by_set["ab-sts-en"]["metrics"]
    for pair in (
        retrieval["task"]["retrieval_top1"],
        retrieval["task"]["mrr_at_10"],
        sts["task"]["similarity_spearman"],
    ):
        assert 0.0 <= pair["target"] <= 1.0 and 0.0 <= pair["reference"] <= 1.0
    # a trained sentence encoder ranks the graded pairs far better than chance, in both dtypes
    assert (
        sts["task"]["similarity_spearman"]["reference"] > 0.5 and retrieval["task"]["retrieval_top1"]["reference"] > 0.5
    )
    assert retrieval["agreement"]["embedding_cosine_mean"] > 0.99
    assert evidence["rule"]["relative_tolerance"] == 0.05 and "statement" in evidence["rule"]
    assert evidence["verdict"] == "pass", [c for ev in evidence["evaluations"] for c in ev["checks"] if not c["passed"]]
    report = check_adaptation(directory, str(python))
    assert report.passed, report.summary
    assert any("re-ran" in note for note in report.evidence[0].notes)


def test_gate_rejects_edited_predictions(minilm: tuple[Path, Path], python: Path, tmp_path: Path) -> None:
    directory = _copy(minilm[0], tmp_path)
    evidence = load(minilm[1])
    predictions = directory / evidence["predictions"]["file"]
    data = json.loads(predictions.read_text())
    data["evaluations"][0]["items"][0]["target"]["embedding"][0] += 0.5
    predictions.write_text(json.dumps(data))
    report = check_adaptation(directory, str(python))
    assert not report.passed and "predictions edited" in report.summary


def test_gate_rejects_edited_runtime_or_wrapper_code(minilm: tuple[Path, Path], python: Path, tmp_path: Path) -> None:
    """The predictions come from ab_runtime.business: an edited copy of it (or of the wrapper) is
    not the framework's code, so its evidence is not trusted, whatever the figures say."""
    directory = _copy(minilm[0], tmp_path / "runtime")
    tasks = directory / "ab_runtime" / "business" / "tasks.py"
    tasks.write_text(tasks.read_text() + "\n# tuned\n")
    report = check_adaptation(directory, str(python))
    assert not report.passed and report.summary == (
        "code not as generated: ab_runtime/business/tasks.py differs from the framework's copy (rendered by another "
        "version, or edited since)"
    )
    directory = _copy(minilm[0], tmp_path / "wrapper")
    (directory / "business_run.py").write_text("print('ASCENDBRIDGE_RESULT {}')\n")
    report = check_adaptation(directory, str(python))
    assert not report.passed and report.summary.startswith("code not as generated: business_run.py differs")


def test_gate_rejects_a_dataset_that_does_not_match_its_card(
    minilm: tuple[Path, Path], python: Path, tmp_path: Path
) -> None:
    directory = _copy(minilm[0], tmp_path)
    data_file = directory / "business_data" / "ab-sts-en.jsonl"
    data_file.write_text(data_file.read_text().replace('"score": 0.5', '"score": 5.0'))
    report = check_adaptation(directory, str(python))
    assert not report.passed and "does not match its data card" in report.summary


def test_gate_rejects_a_metric_that_does_not_recompute(minilm: tuple[Path, Path], python: Path, tmp_path: Path) -> None:
    directory = _copy(minilm[0], tmp_path)
    metrics_path = directory / minilm[1].name
    evidence = json.loads(metrics_path.read_text())
    evidence["evaluations"][1]["metrics"]["task"]["similarity_spearman"]["target"] = 0.99
    metrics_path.write_text(json.dumps(evidence))
    report = check_adaptation(directory, str(python))
    assert not report.passed and "does not recompute" in report.summary and "similarity_spearman" in report.summary


def test_gate_rejects_a_target_outside_the_tolerance(minilm: tuple[Path, Path], python: Path, tmp_path: Path) -> None:
    """A tightened rule (stated in the evidence) that bf16 cannot meet: the gate applies it."""
    directory = _copy(minilm[0], tmp_path)
    predictions = directory / load(minilm[1])["predictions"]["file"]
    rule = PassRule.tightened(rtol=0.0, bounds={"embedding_cosine_mean": 0.9999999})
    evidence = load(build_evidence(predictions, rule))
    assert evidence["verdict"] == "fail"
    report = check_adaptation(directory, str(python))
    assert (
        not report.passed
        and report.summary.startswith("pass rule failed")
        and "embedding_cosine_mean" in report.summary
    )
    assert report.evidence[0].consistent  # the evidence itself is genuine: only the rule failed


def test_business_tool_compare_and_aggregate(minilm: tuple[Path, Path], tmp_path: Path) -> None:
    """compare: two hosts' evidence side by side (here a copy relabelled as a CUDA host's);
    aggregate: JSON, CSV and the figure across adaptations."""
    import os
    import subprocess
    import sys

    tool = Path(__file__).resolve().parents[2] / "business_benchmark" / "scripts" / "business_tool.py"
    other = json.loads(minilm[1].read_text())
    other["run"]["device"], other["run"]["device_name"] = "cuda", "imported from another host"
    other_path = tmp_path / "business_metrics_cuda_bfloat16_pretrained.json"
    other_path.write_text(json.dumps(other))
    proc = subprocess.run(
        [sys.executable, str(tool), "compare", str(minilm[1]), str(other_path), "--json"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert (result["a"]["device"], result["b"]["device"]) == ("cpu", "cuda") and result["notes"] == []
    spearman = next(r for r in result["rows"] if r["metric"] == "similarity_spearman")
    assert spearman["a"] == spearman["b"] and spearman["a_items_per_s"] > 0
    env = {**os.environ, "ASCENDBRIDGE_ADAPTATIONS": str(minilm[0].parent)}
    proc = subprocess.run(
        [sys.executable, str(tool), "aggregate", "--out-dir", str(tmp_path / "out"), "--json"],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(proc.stdout)
    assert summary["skipped"] == [] and summary["rows"] >= 8
    assert {Path(f).name for f in summary["files"]} == {
        "business_summary.json",
        "business_summary.csv",
        "business_scores.png",
    }
    bad = subprocess.run(
        [sys.executable, str(tool), "compare", str(tmp_path / "missing.json"), str(other_path)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert bad.returncode == 2 and bad.stderr.startswith("error:") and len(bad.stderr.strip().splitlines()) == 1
