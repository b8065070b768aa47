"""Evidence reading: tolerant of unknown shapes, strict about paths."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import pytest

from dashboard import evidence


def test_benchmark_runs_parse_known_shapes_and_flag_unreadable(tmp_path: Path) -> None:
    (tmp_path / "benchmark_metrics_npu_fp16_pretrained_wikitext.json").write_text(json.dumps({
        "latency_median_ms": 3.0, "latency_p90_ms": 4.0,
        "accuracy": {"outputs": [{"name": "last_hidden_state", "cosine": 0.999, "passed": True}]},
        "environment": {"torch": "2.7.1", "torch_npu": "2.7.1.post2"},
    }))
    (tmp_path / "benchmark_metrics_cpu_fp32_random_synthetic.json").write_text("{truncated")
    (tmp_path / "benchmark_metrics_bad name.json").write_text("{}")
    runs = evidence.benchmark_runs(tmp_path)
    assert [r.label for r in runs] == ["cpu_fp32_random_synthetic", "npu_fp16_pretrained_wikitext"]
    assert runs[0].readable is False
    npu = runs[1]
    assert npu.latency == {"latency_median_ms": 3.0, "latency_p90_ms": 4.0}
    assert npu.accuracy.rows == [{"name": "last_hidden_state", "cosine": 0.999, "passed": True}]
    assert npu.figures["environment.torch_npu"] == "2.7.1.post2"
    assert evidence.benchmark_runs(None) == []


def test_optimization_notes_tables_and_speedups(tmp_path: Path) -> None:
    assert evidence.optimization_notes(tmp_path) is None
    (tmp_path / "optimization_notes.json").write_text(json.dumps({
        "speedup": 2.0, "chosen": ["bf16"], "tried": {"bf16": {"speedup": 2.0, "kept": True},
                                                     "int8": {"speedup": 0.7, "kept": False}}}))
    notes = evidence.optimization_notes(tmp_path)
    assert notes.summary == {"speedup": 2.0, "chosen": "bf16"}
    assert notes.tables[0].title == "tried" and notes.tables[0].columns == ["name", "speedup", "kept"]
    assert notes.speedups() == [("bf16", 2.0), ("int8", 0.7)]


def test_log_tail_only_inside_logs_dir_and_capped(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "big.log").write_bytes(b"x" * 20_000 + b"\nthe end\xff\n")
    tail = evidence.log_tail(str(logs / "big.log"), logs, max_bytes=100)
    assert tail.truncated and tail.text.endswith("the end\ufffd\n") and len(tail.text) <= 100
    assert evidence.log_tail("big.log", logs).text.endswith("the end\ufffd\n")  # relative to the logs dir
    assert evidence.log_tail(str(logs / ".." / "outside.log"), logs).note.startswith("log is outside")
    (tmp_path / "secret").write_text("secret")
    (logs / "link.log").symlink_to(tmp_path / "secret")
    assert evidence.log_tail(str(logs / "link.log"), logs).text is None
    assert evidence.log_tail(None, logs).note == "no log recorded"
    assert evidence.log_tail(str(logs / "gone.log"), logs).note == "log file no longer exists"


def test_trace_and_adaptation_paths_are_contained(tmp_path: Path) -> None:
    root = tmp_path / "adaptations"
    (root / "m").mkdir(parents=True)
    (root / "m" / "trace_a.json").write_text("{}")
    (tmp_path / "trace_outside.json").write_text("{}")
    (root / "m" / "trace_link.json").symlink_to(tmp_path / "trace_outside.json")
    adapt = evidence.adaptation_dir(root, "m")
    assert evidence.adaptation_dir(root, "../adaptations/../") is None
    assert [n for n, _ in evidence.traces(adapt)] == ["trace_a.json"]
    assert evidence.trace_file(adapt, "trace_a.json").name == "trace_a.json"
    for bad in ("trace_link.json", "../trace_outside.json", "board.db", "trace_missing.json"):
        with pytest.raises(evidence.EvidenceError):
            evidence.trace_file(adapt, bad)


def test_zip_leaves_out_environments_caches_and_symlinks(tmp_path: Path) -> None:
    adapt = tmp_path / "m"
    (adapt / "model_files").mkdir(parents=True)
    (adapt / "model_files" / "patched.py").write_text("x = 1\n")
    (adapt / "pyproject.toml").write_text("[project]\n")
    (adapt / ".venv" / "lib").mkdir(parents=True)
    (adapt / ".venv" / "lib" / "torch.so").write_bytes(b"\0")
    (adapt / "__pycache__").mkdir()
    (adapt / "__pycache__" / "x.pyc").write_bytes(b"\0")
    (adapt / "etc").symlink_to("/etc")
    with evidence.zip_adaptation(adapt) as spool:
        names = zipfile.ZipFile(spool).namelist()
    assert names == ["m/pyproject.toml", "m/model_files/patched.py"]
