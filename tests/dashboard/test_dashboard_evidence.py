"""Evidence reading: metrics files through their one reader, other files tolerantly, strict about paths."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import pytest

from ab_runtime.metrics_file import METRICS_SCHEMA
from dashboard import evidence
from tests.dashboard.dash_support import measured_pass


def test_benchmark_runs_read_timing_and_per_output_accuracy(tmp_path: Path) -> None:
    (tmp_path / "benchmark_metrics_npu_float16_pretrained_wikitext.json").write_text(
        json.dumps(
            {
                "schema": METRICS_SCHEMA,
                "run": {"device": "npu", "dtype": "float16", "mode": "pretrained", "dataset": "wikitext"},
                "timing": {
                    "median_ms": 3.0,
                    "p90_ms": 4.0,
                    "min_ms": 3.0,
                    "samples_ms": [3.0, 4.0],
                    "profiler_during_timing": False,
                },
                "throughput": {"batch_size": 1, "samples_per_s": 333.3},
                "reference_timing": {"median_ms": 9.0},
                "accuracy": {
                    "verdict": "fail",
                    "outputs": {
                        "last_hidden_state": {
                            "name": "last_hidden_state",
                            "kind": "float",
                            "verdict": "fail",
                            "reasons": ["cosine 0.98 < 0.99"],
                            "metrics": {"rmse_vs_fp64": 0.1, "cosine": 0.98, "finite": True},
                            "applied": {"cosine_min": 0.99},
                        },
                        "pooler_output": {
                            "name": "pooler_output",
                            "kind": "float",
                            "verdict": "pass",
                            "metrics": {"cosine": 0.9999, "max_abs_err_scaled": 0.001},
                        },
                    },
                },
                "environment": {"torch": "2.7.1", "torch_npu": "2.7.1.post2"},
            }
        )
    )
    (tmp_path / "benchmark_metrics_cpu_fp32_random_synthetic.json").write_text("{truncated")
    (tmp_path / "benchmark_metrics_cpu_fp32_random_other.json").write_text(json.dumps({"schema": METRICS_SCHEMA}))
    (tmp_path / "benchmark_metrics_bad name.json").write_text("{}")
    runs = evidence.benchmark_runs(tmp_path)
    assert [r.label for r in runs] == [
        "cpu_fp32_random_other",
        "cpu_fp32_random_synthetic",
        "npu_float16_pretrained_wikitext",
    ]
    assert runs[0].readable is False and runs[1].readable is False  # refused by the format's reader
    npu = runs[2]
    assert npu.latency == {"median_ms": 3.0, "p90_ms": 4.0, "min_ms": 3.0}  # samples stay in the file
    assert npu.reference_latency == {"median_ms": 9.0} and npu.verdict == "fail"
    hidden, pooler = npu.outputs
    assert (hidden.name, hidden.verdict, hidden.reasons) == ("last_hidden_state", "fail", ["cosine 0.98 < 0.99"])
    assert list(hidden.measured) == ["cosine", "rmse_vs_fp64", "finite"]  # cosine first, whatever the file order
    assert hidden.thresholds == {"cosine_min": 0.99} and pooler.thresholds == {}
    assert npu.measured_columns == ["cosine", "rmse_vs_fp64", "finite", "max_abs_err_scaled"]
    assert npu.figures["environment.torch_npu"] == "2.7.1.post2"
    assert evidence.benchmark_runs(None) == []


def test_optimization_notes_passes_final_choice_and_speedups(tmp_path: Path) -> None:
    assert evidence.optimization_notes(tmp_path) is None
    (tmp_path / "optimization_notes.json").write_text(
        json.dumps(
            {
                "passes": [
                    measured_pass("bf16", True, "faster", 2.0, [1.8, 2.2]),
                    {"name": "int8", "measured": False, "kept": False, "reason": "not applicable: no Linear"},
                ],
                "combination": [
                    {
                        "passes": ["bf16", "threads"],
                        "measured": True,
                        "kept": False,
                        "reason": "no gain",
                        "paired": {"speedup": 1.0, "interval": [0.9, 1.1]},
                    }
                ],
                "final": {
                    "passes": ["bf16"],
                    "outcome": "gain",
                    "speedup": 2.0,
                    "interval": [1.8, 2.2],
                    "accuracy": {"verdict": "pass", "min_cosine": 0.999},
                    "cold_start": {"build_s": 1.0},
                },
            }
        )
    )
    notes = evidence.optimization_notes(tmp_path)
    assert [(p.name, p.tried, p.speedup, p.interval, p.kept) for p in notes.passes] == [
        ("bf16", "measured", 2.0, (1.8, 2.2), True),
        ("int8", "not measured", None, None, False),
        ("bf16 + threads", "measured", 1.0, (0.9, 1.1), False),
    ]
    assert notes.passes[1].reason == "not applicable: no Linear"
    assert notes.final == {
        "passes": "bf16",
        "outcome": "gain",
        "speedup": 2.0,
        "interval": "1.8, 2.2",
        "accuracy": "pass",
    }
    assert notes.speedups() == [("bf16", 2.0), ("bf16 + threads", 1.0)]
    (tmp_path / "optimization_notes.json").write_text("[not an object]")
    assert evidence.optimization_notes(tmp_path).readable is False


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


def test_workload_headline_and_sweep_chart(tmp_path: Path) -> None:
    """TTFT / TPOT / tokens/s of a generation run and the batch-sweep chart of an encoder run."""
    from dashboard.views import _charts

    base = {
        "schema": METRICS_SCHEMA,
        "run": {"device": "cpu", "dtype": "float32", "mode": "dry_run", "dataset": "synthetic"},
        "timing": {"median_ms": 2.0, "p90_ms": 2.0, "min_ms": 2.0},
        "reference_timing": {"median_ms": 4.0},
        "throughput": {"samples_per_s": 500.0},
        "accuracy": {"verdict": "pass", "outputs": {}},
    }
    (tmp_path / "benchmark_metrics_cpu_float32_dry_run_synthetic.json").write_text(
        json.dumps(
            {
                **base,
                "workload": {
                    "workload": {"name": "generation"},
                    "greedy_vs_reference": {"match_rate": 0.75, "first_divergence": 3},
                    "headline": {
                        "ttft_ms": 9.0,
                        "tpot_ms": 1.5,
                        "tokens_per_s": 666.7,
                        "batch": 4,
                        "batch_tokens_per_s": 2000.0,
                        "decode_bandwidth_gbs": 0.4,
                    },
                },
            }
        )
    )
    (tmp_path / "benchmark_metrics_cpu_bfloat16_dry_run_synthetic.json").write_text(
        json.dumps(
            {
                **base,
                "workload": {
                    "workload": {"name": "batch_sweep"},
                    "knee_batch": 8,
                    "points": [
                        {"batch": 1, "samples_per_s": 100.0},
                        {"batch": 8, "samples_per_s": 700.0},
                        {"batch": "x"},
                    ],
                    "headline": {
                        "throughput_samples_per_s": 700.0,
                        "knee_samples_per_s": 700.0,
                        "batch1_latency_ms": 10.0,
                    },
                },
            }
        )
    )
    bf16, fp32 = evidence.benchmark_runs(tmp_path)
    assert (fp32.workload["tpot_ms"], fp32.workload["first_divergence"], fp32.workload["name"]) == (
        1.5,
        3,
        "generation",
    )
    assert bf16.sweep == [(1, 100.0), (8, 700.0)] and bf16.workload["knee_batch"] == 8
    assert _charts([bf16, fp32], None)["sweep"] == {
        "labels": ["batch 1", "batch 8"],
        "values": [100.0, 700.0],
        "run": bf16.label,
    }
    assert _charts([fp32], None)["sweep"] is None
