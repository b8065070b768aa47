"""Where a training step's time goes: a known synthetic trace gives a known table; the FLOPs per
token follow the documented formula; the gate refuses a profile whose table its trace does not give."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ab_runtime.train.flops import mfu, training_flops_per_token
from ab_runtime.train.profile_table import reduce_trace
from training.figures import PROFILE_FILE, mfu_figures, profile_figures, profile_problems, read_peak, write_peak


def op(name: str, ts: float, dur: float, cat: str = "cpu_op", tid: int = 1) -> dict[str, Any]:
    return {"ph": "X", "cat": cat, "name": name, "ts": ts, "dur": dur, "pid": 1, "tid": tid}


TRACE = {
    "traceEvents": [
        op("ProfilerStep#1", 0, 1000, "user_annotation"),
        op("ProfilerStep#2", 1000, 1000, "user_annotation"),
        op("aten::mm", 10, 600),  # 500 of its own: aten::copy_ runs inside it
        op("aten::copy_", 100, 100),
        op("aten::add", 700, 100),
        op("c10d::allreduce_", 1010, 50),  # communication
        op("Optimizer.step#AdamW.step", 1100, 200, "user_annotation"),
        op("aten::add_", 1150, 80),  # inside the optimizer's step
        op("ab.data", 1400, 50, "user_annotation"),
        op("aten::randint", 1410, 20),  # inside the data annotation
        {"ph": "i", "name": "an instant event, not timed", "ts": 5},
    ]
}


def test_a_known_trace_gives_a_known_table() -> None:
    table = reduce_trace(TRACE)
    assert table["steps"] == 2 and table["window_ms"] == pytest.approx(2.0)
    assert table["compute_ms"] == pytest.approx(0.7) and table["communication_ms"] == pytest.approx(0.05)
    assert table["optimizer_ms"] == pytest.approx(0.08) and table["data_ms"] == pytest.approx(0.02)
    assert table["host_overhead_and_idle_ms"] == pytest.approx(2.0 - 0.85)
    assert sum(table["shares"].values()) == pytest.approx(1.0)
    ranked = [(o["name"], round(o["ms"], 6)) for o in table["operators"]]
    # the operators that make up 90 % of compute, most first (a tie by name): 500 + 100 + 100 of 700
    assert ranked == [("aten::mm", 0.5), ("aten::add", 0.1), ("aten::copy_", 0.1)]
    assert not table["device_kernels"]


def test_on_a_device_trace_the_kernels_are_the_compute() -> None:
    events = [*TRACE["traceEvents"], op("ampere_sgemm_128x64", 20, 300, "kernel", tid=7)]
    table = reduce_trace({"traceEvents": events})
    assert table["device_kernels"] and table["compute_ms"] == pytest.approx(0.3)
    assert [o["name"] for o in table["operators"]] == ["ampere_sgemm_128x64"]


def test_flops_per_token_follow_the_formula_and_mfu_is_their_share_of_the_peak() -> None:
    config = {"num_hidden_layers": 2, "hidden_size": 64}
    full = training_flops_per_token(config, parameters=10_000, trainable=10_000, seq_len=32, embedding_parameters=2_000)
    assert full == 6 * 8_000 + 12 * 2 * 64 * 32  # 6N of the multiplied parameters, plus attention
    lora = training_flops_per_token(config, parameters=10_000, trainable=100, seq_len=32, embedding_parameters=2_000)
    assert lora == 4 * 8_000 + 2 * 100 + 12 * 2 * 64 * 32
    assert mfu(full, 1000.0, full * 4000.0) == pytest.approx(0.25) and mfu(full, 1000.0, 0.0) is None
    figures = profile_figures({"flops_per_token": full, "table": reduce_trace(TRACE)}, 1000.0)
    assert figures["model_tflops"] == pytest.approx(full * 1000.0 / 1e12)
    assert figures["profile_compute_share"] == pytest.approx(0.35)


def test_the_gate_refuses_a_table_its_trace_does_not_give(tmp_path: Path) -> None:
    (tmp_path / "profile_trace.json").write_text(json.dumps(TRACE))
    profile = {"table": reduce_trace(TRACE), "trace": "profile_trace.json", "flops_per_token": 1.0}
    assert profile_problems(tmp_path, profile) == [] and profile_problems(tmp_path, None) == []
    profile["table"]["shares"]["compute"] = 0.9  # a flattering edit
    assert profile_problems(tmp_path, profile) == [f"{PROFILE_FILE}: the table is not what its trace reduces to"]


def test_mfu_is_the_model_tflops_over_the_measured_gemm_of_the_runs_dtype(tmp_path: Path) -> None:
    judged = {
        "rows": [
            {"figure": "gemm_float32", "measured": 0.0673},
            {"figure": "gemm_bfloat16", "measured": 0.851},
            {"figure": "gemm_float16", "measured": None},  # not supported: no peak
            {"figure": "copy", "measured": 25.9},
        ]
    }
    write_peak(tmp_path, judged)
    peak = read_peak(tmp_path)
    assert peak == {"gemm_float32": 0.0673, "gemm_bfloat16": 0.851}
    assert mfu_figures(peak, "fp32", 0.0100) == {"mfu": pytest.approx(0.0100 / 0.0673), "peak_tflops": 0.0673}
    assert mfu_figures(peak, "bf16-autocast", 0.0100)["mfu"] == pytest.approx(0.0100 / 0.851)
    assert mfu_figures({}, "fp32", 0.01) == {} and mfu_figures(peak, "fp32", None) == {}
