"""benchmark_tool (hotspots, compare, aggregate, roofline) and the environment probe."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

from ascendbridge.board.store import BoardStore
from ascendbridge.config import REPO_ROOT
from ascendbridge.gatekit.trace import load_trace
from benchmark.hotspots import analyse, self_times
from benchmark.probe import latest_probe
from benchmark.roofline import roofline

TOOL = REPO_ROOT / "benchmark" / "scripts" / "benchmark_tool.py"
PROBE = REPO_ROOT / "scripts" / "env_probe.py"


def tool(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(TOOL), *args], capture_output=True, text=True, timeout=600, env=env)


def test_hotspots_on_a_real_trace(runs: dict) -> None:
    directory = runs["tiny-gpt2"][0]
    report = analyse(load_trace(directory / "trace_cpu_bfloat16_dry_run_synthetic.json"))
    host = report["host"]
    assert report["kind"] == "cpu" and report["device"] is None
    assert host["top"] and host["top"][0]["self_us"] >= host["top"][-1]["self_us"]
    assert any(row["name"] in ("aten::addmm", "aten::mm", "aten::bmm", "aten::matmul") for row in host["top"])
    # Shares are of the whole window, so the idle line and the ops add up to 100% at most.
    assert sum(r["pct_of_window"] for r in host["top"]) + host["idle_pct_of_window"] <= 100.0 + 1e-6
    assert 0 < len(host["covering_90pct"]) <= host["operators"]
    proc = tool("hotspots", str(directory / "trace_cpu_bfloat16_dry_run_synthetic.json"), "--top", "5")
    assert proc.returncode == 0 and "(idle: no operator running)" in proc.stdout


def test_self_time_subtracts_children() -> None:
    outer = {"name": "linear", "ts": 0, "dur": 10}
    inner = {"name": "addmm", "ts": 2, "dur": 6}
    after = {"name": "gelu", "ts": 20, "dur": 5}
    pairs, busy = self_times([after, inner, outer])
    assert {e["name"]: s for e, s in pairs} == {"linear": 4, "addmm": 6, "gelu": 5}
    assert busy == 15


def fake_npu_trace() -> list[dict]:
    """FakeNpuTrace: the shape of a torch_npu trace_view.json (no NPU exists here)."""
    return [
        {"ph": "M", "name": "process_name", "pid": 1, "tid": 0, "args": {"name": "Python"}},
        {"ph": "M", "name": "process_name", "pid": 2, "tid": 0, "args": {"name": "Ascend Hardware"}},
        {"ph": "X", "cat": "cpu_op", "name": "aten::linear", "pid": 1, "tid": 1, "ts": 0, "dur": 50},
        {"ph": "X", "cat": "cpu_op", "name": "aten::nonzero", "pid": 1, "tid": 1, "ts": 60, "dur": 30},
        {"ph": "X", "name": "MatMulV2", "pid": 2, "tid": 7, "ts": 10, "dur": 40, "args": {"Task Type": "AI_CORE"}},
        {"ph": "X", "name": "NonZero", "pid": 2, "tid": 7, "ts": 65, "dur": 20, "args": {"Task Type": "AI_CPU"}},
        {"ph": "X", "name": "MemcpyHtoD", "pid": 2, "tid": 8, "ts": 90, "dur": 10, "args": {"Task Type": "MEMCPY"}},
    ]


def test_hotspots_on_npu_trace_reports_device_split_copies_and_fallbacks() -> None:
    report = analyse(fake_npu_trace())
    assert report["kind"] == "npu"
    assert report["host_vs_device"] == {"host": 80, "device": 70}
    assert report["device"]["top"][0]["name"] == "MatMulV2"
    assert report["copies"]["device"] == {"calls": 1, "self_us": 10}
    assert report["cpu_fallbacks"] == [{"name": "NonZero", "calls": 1}]


def test_hotspots_bad_trace_is_one_line_error(tmp_path: Path) -> None:
    bad = tmp_path / "trace.json"
    bad.write_text("{not json")
    proc = tool("hotspots", str(bad))
    assert proc.returncode == 2 and proc.stderr.startswith("error: ") and "Traceback" not in proc.stderr


def test_compare_two_real_outputs(runs: dict, python: Path) -> None:
    directory = runs["tiny-vit"][0]
    out = str(directory / "outputs_cpu_float32_dry_run_synthetic.pt")
    proc = tool("compare", out, out, "--python", str(python), "--json")
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result["verdict"] == "pass" and set(result["outputs"]) == {"logits"}
    missing = tool("compare", out, str(directory / "nope.pt"), "--python", str(python))  # checked before torch loads
    assert missing.returncode == 2 and "nope.pt: file not found" in missing.stderr


def test_probe_on_this_machine_is_stored_and_feeds_roofline(
    runs: dict, python: Path, board: BoardStore, board_path: Path, tmp_path: Path
) -> None:
    env = dict(os.environ, ASCENDBRIDGE_ADAPTATIONS=str(runs["tiny-bert"][0].parent))
    none = tool("roofline", "tiny-bert", env=env)
    assert none.returncode == 1 and "no environment probe" in none.stderr
    proc = subprocess.run(
        [sys.executable, str(PROBE), "--python", str(python), "--device", "cpu", "--budget-s", "0.1"],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert proc.returncode == 0, proc.stderr
    assert "GFLOP/s" in proc.stdout
    probe = latest_probe(board, "cpu")
    assert probe is not None and latest_probe(board, "npu") is None
    assert probe["measured_on"] == "cpu" and probe["versions"]["torch"].startswith("2.")
    assert probe["devices"]["cpu"]["count"] >= 1 and probe["cann"] is None
    assert probe["peaks"]["gemm_gflops"]["float32"] > 0 and probe["peaks"]["bandwidth_gbs"] > 0
    metrics = json.loads((runs["tiny-gpt2"][0] / "benchmark_metrics_cpu_bfloat16_dry_run_synthetic.json").read_text())
    r = roofline(metrics, probe)
    model = metrics["model"]  # 2 x non-embedding params x tokens (2 x 16) is the floor of the estimate
    assert r["gflops_per_forward"] * 1e9 >= 2 * (model["parameters"] - model["embedding_parameters"]) * 2 * 16
    assert r["bound"] in ("compute", "memory") and r["pct_of_attainable"] > 0
    done = tool("roofline", "tiny-bert", env=env)
    assert done.returncode == 0, done.stderr
    assert "% of attainable" in done.stdout
    wrong = tool("roofline", "tiny-bert", "--dtype", "float16", env=env)
    assert wrong.returncode == 2 and "no float16 run" in wrong.stderr


def test_aggregate_writes_reports_and_figures(runs: dict, tmp_path: Path) -> None:
    root = runs["tiny-bert"][0].parent
    (root / "broken").mkdir(exist_ok=True)
    (root / "broken" / "benchmark_metrics_cpu_float32_dry_run_synthetic.json").write_text("{}")
    env = dict(os.environ, ASCENDBRIDGE_ADAPTATIONS=str(root))
    proc = tool(
        "aggregate",
        "--out-dir",
        str(tmp_path / "reports"),
        "--figures-dir",
        str(tmp_path / "figures"),
        "--json",
        env=env,
    )
    assert proc.returncode == 0, proc.stderr
    summary = json.loads((tmp_path / "reports" / "benchmark_summary.json").read_text())
    assert {r["adaptation"] for r in summary["runs"]} == {"tiny-bert", "tiny-gpt2", "tiny-vit"}
    assert len(summary["skipped"]) == 1 and "broken" in summary["skipped"][0]["file"]
    rows = list(csv.DictReader(open(tmp_path / "reports" / "benchmark_summary.csv")))
    assert len(rows) == 3 and all(float(r["median_ms"]) > 0 for r in rows)
    for png in ("latency.png", "accuracy.png"):
        assert (tmp_path / "figures" / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
