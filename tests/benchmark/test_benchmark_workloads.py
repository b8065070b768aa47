"""Workload profiles: generation with a KV cache and a batch sweep, measured by accuracy_run and
re-derived (and re-run) by the benchmark gate; the pure figures on constructed inputs."""

from __future__ import annotations

import copy
import json
import shutil
from pathlib import Path

import pytest

from ab_runtime import workload_figures as wf
from ab_runtime.errors import SpecError
from ascendbridge.gatekit.metrics_check import check_metrics
from bench.support.tiny_adaptations import TINY_MODELS, TINY_WORKLOAD
from benchmark.gate import check_adaptation
from benchmark.settings import BenchmarkSettings
from benchmark.stage import board_figures


def _metrics(directory: Path) -> tuple[Path, dict]:
    path = next(directory.glob("benchmark_metrics_*.json"))
    return path, json.loads(path.read_text())


@pytest.mark.parametrize("k", [0, 3, 7])
def test_first_divergence_is_the_token_where_the_target_was_perturbed(k: int) -> None:
    reference = [5, 9, 2, 2, 7, 1, 3, 8]
    target = reference[:k] + [(t + 1) % 10 for t in reference[k:]]  # perturbed from token k on
    result = wf.divergence(target, reference)
    assert result["first_divergence"] == k
    assert result["match_rate"] == pytest.approx(k / len(reference))
    assert wf.divergence(reference, reference) == {"match_rate": 1.0, "first_divergence": None, "compared": 8}
    assert wf.divergence(reference[:5], reference)["first_divergence"] == 5  # a short output diverges at its end


def test_sweep_knee_on_injected_measurements() -> None:
    def points(*throughputs: float) -> list[dict]:
        return [{"batch": b, "samples_per_s": t} for b, t in zip((1, 8, 32), throughputs)]

    assert wf.knee(points(100.0, 700.0, 760.0)) == 8  # 700 >= 0.9 x 760: batch 32 buys little
    assert wf.knee(points(100.0, 300.0, 800.0)) == 32
    assert wf.knee(points(500.0, 480.0, 300.0)) == 1  # throughput never improves on batch 1
    assert wf.knee(points(100.0)) == 1 and wf.knee([]) is None


def test_workload_resolution_and_bad_input() -> None:
    assert wf.resolve("causal_lm", None).name == "generation"
    assert wf.resolve("seq2seq", {"name": "generation"}).name == "encoder_generation"
    assert wf.resolve("causal_lm", {}, "encoder_generation").name == "generation"
    assert wf.resolve("feature_extraction", {"sweep": [1, 2]}).sweep == (1, 2)
    assert wf.resolve("causal_lm", {"name": "generation"}, "forward").name == "forward"  # the lead's override wins
    for family, section, why in (
        ("masked_lm", {"name": "generation"}, "needs a generating family"),
        ("causal_lm", {"new_tokens": 1}, "new_tokens"),
        ("causal_lm", {"prompt": 3}, "unknown key"),
        ("causal_lm", {"name": "decode"}, "unknown"),
    ):
        with pytest.raises(SpecError, match=why):
            wf.resolve(family, section)
    with pytest.raises(ValueError, match="benchmark_workload"):
        BenchmarkSettings.from_sources({"benchmark_workload": "decode"})


def test_generation_runs_with_a_kv_cache_and_its_figures_are_re_derived(runs: dict) -> None:
    _, metrics = _metrics(runs["tiny-gpt2"][0])
    body = metrics["workload"]
    assert body["workload"]["name"] == "generation" and [r["batch"] for r in body["runs"]] == [1, TINY_WORKLOAD.batch]
    config = TINY_MODELS["tiny-gpt2"]["config"]
    for run in body["runs"]:
        assert len(run["tokens"]) == run["batch"] and all(len(t) == TINY_WORKLOAD.new_tokens for t in run["tokens"])
        assert len(run["decode_steps_ms"][0]) == TINY_WORKLOAD.new_tokens - 1
        # keys and values (2) x layers x batch x hidden x cached positions x bfloat16 bytes: the cache was used
        positions = TINY_WORKLOAD.prompt_len + TINY_WORKLOAD.new_tokens - 1
        assert run["kv_cache_bytes"] == 2 * config["n_layer"] * run["batch"] * config["n_embd"] * positions * 2
        assert run["bytes_per_decode_step"] > run["weight_bytes"] > 0 and run["decode_bandwidth_gbs"] > 0
    # the CPU bfloat16 target of random weights agrees with the float32 reference's greedy tokens here
    assert body["greedy_vs_reference"]["compared"] == TINY_WORKLOAD.new_tokens
    assert check_metrics(metrics) == []
    values, units = board_figures(runs["tiny-gpt2"][2], probe_bandwidth_gbs=10.0)
    assert values["tpot_ms"] == body["runs"][0]["tpot_ms"]["median_ms"] and units["tokens_per_s"] == "tokens/s"
    assert values["decode_bandwidth_pct"] == pytest.approx(10.0 * body["runs"][0]["decode_bandwidth_gbs"])
    doctored = copy.deepcopy(metrics)
    doctored["workload"]["runs"][1]["tokens_per_s"] *= 2
    doctored["workload"]["runs"][0]["decode_steps_ms"][0][0] /= 4  # a faster sample, figures left as they were
    problems = check_metrics(doctored)
    assert any("tokens_per_s" in p for p in problems) and any("tpot_ms" in p for p in problems)
    claimed = copy.deepcopy(metrics)
    claimed["workload"]["greedy_vs_reference"] = {"match_rate": 1.0, "first_divergence": None, "compared": 4}
    claimed["workload"]["reference_tokens"] = [t + 1 for t in claimed["workload"]["reference_tokens"]]
    assert any("greedy_vs_reference" in p for p in check_metrics(claimed))


def test_batch_sweep_figures_and_knee_are_re_derived(runs: dict) -> None:
    _, metrics = _metrics(runs["tiny-bert"][0])
    body = metrics["workload"]
    assert [p["batch"] for p in body["points"]] == TINY_WORKLOAD.sweep
    assert body["knee_batch"] == wf.knee(body["points"]) and check_metrics(metrics) == []
    doctored = copy.deepcopy(metrics)
    doctored["workload"]["knee_batch"] = 1 if body["knee_batch"] != 1 else 4
    assert any("knee_batch" in p for p in check_metrics(doctored))


def test_gate_re_runs_the_reference_generation(runs: dict, python: Path, tmp_path: Path) -> None:
    """Reference tokens forged together with a consistent agreement figure: only regenerating the
    CPU float32 reference's greedy tokens can tell, and the gate does."""
    target = tmp_path / "tiny-gpt2"
    shutil.copytree(runs["tiny-gpt2"][0], target)
    path, metrics = _metrics(target)
    body = metrics["workload"]
    body["reference_tokens"] = list(body["runs"][0]["tokens"][0])  # "the port matches the reference exactly"
    body["greedy_vs_reference"] = wf.divergence(body["runs"][0]["tokens"][0], body["reference_tokens"])
    if (
        body["reference_tokens"]
        == json.loads(next(runs["tiny-gpt2"][0].glob("benchmark_metrics_*.json")).read_text())["workload"][
            "reference_tokens"
        ]
    ):
        body["reference_tokens"][1] += 1  # the honest run already agreed: forge a disagreeing reference instead
        body["greedy_vs_reference"] = wf.divergence(body["runs"][0]["tokens"][0], body["reference_tokens"])
    path.write_text(json.dumps(metrics))
    report = check_adaptation(target, str(python))
    assert not report.passed
    assert "reference_tokens are not the CPU float32 reference's greedy tokens" in report.summary
