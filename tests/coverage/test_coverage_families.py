"""Issue 13's families on tiny configs through discovery, adaptation, healing and benchmark:
CTC speech recognition and audio classification (audio through the model type's real feature
extractor), time-series forecasting, LLM-backbone embedders and rerankers, mixture-of-experts
routing (decisions compared, near-ties named) and hybrid state-space models on their PyTorch path.

One module-scoped pipeline builds everything once: the tiny configs, one board, one rendered
package per model, one batched dry run of every package, one benchmark run per family group.
"""

from __future__ import annotations

import json
import subprocess
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from ab_runtime.metrics_file import find_metrics
from adaptation.stage import ADAPTATION_STAGE
from ascendbridge.board import BoardStore
from ascendbridge.discovery.task_family import classify
from ascendbridge.package.spec import AdaptationSpec
from ascendbridge.stage_api import StageContext
from bench.support.local_model import fresh_board, stage_context
from bench.support.tiny_adaptations import run_accuracy
from bench.support.torch_env import torch_env_python
from benchmark.gate import recompute
from benchmark.render import render_accuracy_run
from healing.stage import HEALING_STAGE
from tests.coverage.coverage_support import HERE, prepare, register, write_models
from tests.runtime.rt_support import RUNTIME_PARENT, run_batch

pytestmark = pytest.mark.slow  # fast tier: every family through the preparation stages

# One benchmark run per family group; PatchTST in bfloat16, where its family's row of the table applies.
BENCHMARKED = {"wav2vec2-ctc": "float32", "patchtst": "bfloat16", "qwen3-embed": "float32", "jamba": "float32"}
HEALED = "wav2vec2-ctc"  # the CTC model with audio input goes through the real Adaptation and Healing stages


@dataclass
class Pipeline:
    python: Path
    board: BoardStore
    models: dict[str, dict[str, Any]]
    contexts: dict[str, StageContext]
    demos: dict[str, dict[str, Any]]
    benchmarks: dict[str, tuple[int, dict[str, Any], str, str]]
    healing: Any


@pytest.fixture(scope="module")
def pipeline(tmp_path_factory: pytest.TempPathFactory) -> Pipeline:
    root = tmp_path_factory.mktemp("coverage")
    with pytest.MonkeyPatch.context() as env:
        board = fresh_board(env, root)
        python = torch_env_python()
        models = write_models(root / "models")
        contexts = {name: register(board, name, entry["path"]) for name, entry in models.items()}
        for name, ctx in contexts.items():
            if name != HEALED:
                prepare(ctx, dtype=BENCHMARKED.get(name))
        healed = contexts[HEALED]
        adapted = ADAPTATION_STAGE.run(healed)  # the real stage: spec, render, uv lock; then its gate
        assert adapted.status == "done", adapted.summary
        assert ADAPTATION_STAGE.gate(healed).passed
        heal_ctx = stage_context(board, healed.model.model_id, "healing", healing_max_attempts=1)
        with ThreadPoolExecutor(max_workers=1) as pool:  # the heal syncs a uv env while the batch runs
            healing = pool.submit(lambda: (HEALING_STAGE.run(heal_ctx), heal_ctx))
            argvs = [
                ["--dry-run", "--device", "cpu", "--spec", str(ctx.adaptation_dir / "adaptation.json")]
                for ctx in contexts.values()
            ]
            bad = bad_specs(root, contexts)
            runs = run_batch(python, argvs + list(bad.values()))
            healing_result = healing.result()
        render_accuracy_run(AdaptationSpec.load(healed.adaptation_dir), healed.adaptation_dir)
        with ThreadPoolExecutor(max_workers=len(BENCHMARKED)) as pool:
            done = {
                name: pool.submit(run_accuracy, python, contexts[name].adaptation_dir, "--device", "cpu")
                for name in BENCHMARKED
            }
            benchmarks = {name: future.result() for name, future in done.items()}
        demos = dict(zip([*contexts, *bad], runs))
        yield Pipeline(python, board, models, contexts, demos, benchmarks, healing_result)
        board.close()


def bad_specs(root: Path, contexts: dict[str, StageContext]) -> dict[str, list[str]]:
    """Specs a person could get wrong: a forecaster loaded as its bare backbone, an unknown pooling."""
    out = {}
    for name, source, change in (
        ("bare-forecaster", "patchtst", {"model_class": "PatchTSTModel"}),
        ("bad-pooling", "qwen3-embed", {"sentence_transformers_pooling": "median"}),
    ):
        spec = json.loads((contexts[source].adaptation_dir / "adaptation.json").read_text())
        path = root / f"{name}.json"
        path.write_text(json.dumps({**spec, **change}))
        out[name] = ["--dry-run", "--device", "cpu", "--spec", str(path)]
    return out


def _summary(run: dict[str, Any]) -> str:
    return next(line for line in run["stdout"].splitlines() if line.startswith("result: "))


def test_discovery_names_each_family_and_the_adapter_builds_its_spec(pipeline: Pipeline) -> None:
    for name, entry in pipeline.models.items():
        record = pipeline.contexts[name].model
        assert record.task_family == entry["family"], (name, record.metadata["task_family_reason"])
        spec = json.loads((pipeline.contexts[name].adaptation_dir / "adaptation.json").read_text())
        assert spec["task_family"] == entry["family"] and spec["model_class"] == entry["model_class"]
    embed = json.loads((pipeline.contexts["qwen3-embed"].adaptation_dir / "adaptation.json").read_text())
    assert embed["sentence_transformers_pooling"] == "lasttoken"
    assert "one label" in pipeline.contexts["bert-reranker"].model.metadata["task_family_reason"]
    # The Hub's pipeline tag decides what the config alone cannot; a two-label classifier stays one.
    assert (
        classify({"model_type": "patchtsmixer"}, pipeline_tag="time-series-forecasting").family
        == "time_series_forecasting"
    )
    assert (
        classify({"architectures": ["Wav2Vec2ForSequenceClassification"], "model_type": "wav2vec2"}).family
        == "audio_classification"
    )
    tagged = classify(
        {"architectures": ["XLMRobertaForSequenceClassification"], "model_type": "xlm-roberta", "num_labels": 2},
        pipeline_tag="text-ranking",
    )
    assert tagged.family == "reranker" and "text-ranking" in tagged.reason
    assert (
        classify({"architectures": ["BertForSequenceClassification"], "model_type": "bert", "num_labels": 2}).family
        == "sequence_classification"
    )
    assert (
        classify({"architectures": ["BertModel"], "model_type": "bert"}, True, pooling="lasttoken").family
        == "llm_embedding"
    )
    assert classify({"model_type": "patchtsmixer"}).family is None


def test_ctc_model_with_audio_input_passes_adaptation_and_healing(pipeline: Pipeline) -> None:
    """The real stages: Adaptation renders and locks (its gate passed in the fixture), Healing syncs
    the package's own uv environment and runs its demo on one second of audio."""
    outcome, ctx = pipeline.healing
    log = ctx.log.getvalue()
    assert outcome.status == "done" and len(outcome.result["attempts"]) == 1, f"{outcome.summary}\n{log[-3000:]}"
    dry = outcome.result["dry_run"]
    assert dry["ok"] and dry["task_family"] == "ctc_speech_recognition" and set(dry["outputs"]) == {"logits"}
    assert dry["outputs"]["logits"]["shape"] == [2, 798, 12]  # 16000 samples / conv strides 5 x 4, 12 CTC tokens
    assert "inputs (seeded synthetic (seed 1234)): input_values [2, 16000]" in log
    assert "greedy CTC transcript (798 frames, blank 0)" in log and "characters '" in log


def test_every_family_runs_with_its_inputs_outputs_and_summary(pipeline: Pipeline) -> None:
    routing = {  # two MoE layers of four experts, two routed a token (Qwen3-MoE and Jamba alike)
        "router_logits.0": [2, 32, 4],
        "routing.0": [2, 32, 2],
        "router_logits.1": [2, 32, 4],
        "routing.1": [2, 32, 2],
    }
    moe = ({"input_ids": [2, 32]}, {"logits": [2, 32, 128], **routing}, "experts of the first token")
    expected = {  # name -> (inputs, outputs, words of the readable summary)
        "wav2vec2-ctc": ({"input_values": [2, 16000]}, {"logits": [2, 798, 12]}, "characters '"),
        "hubert-ctc": ({"input_values": [2, 1600]}, {"logits": [2, 78, 12]}, "greedy CTC transcript"),
        "ast": ({"input_values": [2, 64, 32]}, {"logits": [2, 3]}, "predicted label: "),
        "patchtst": (
            {"past_values": [2, 32, 2]},
            {"prediction_outputs": [2, 8, 2]},
            "forecast horizon 8 steps, 2 channels",
        ),
        "timesfm": (
            {"past_values": [2, 32]},
            {"mean_predictions": [2, 8], "full_predictions": [2, 8, 10]},
            "forecast horizon 8",
        ),
        "qwen3-embed": ({"input_ids": [2, 32]}, {"sentence_embedding": [2, 32]}, "last-token embedding dim 32"),
        "bert-reranker": ({"input_ids": [2, 32]}, {"logits": [2, 1]}, "relevance scores"),
        "qwen3-moe": moe,
        "mamba": ({"input_ids": [2, 32]}, {"logits": [2, 32, 128]}, "top token ids"),
        "jamba": moe,
    }
    for name, (inputs, outputs, words) in expected.items():
        run = pipeline.demos[name]
        assert run["rc"] == 0, (name, run["stderr"][-2000:])
        shapes = {k: v["shape"] for k, v in run["result"]["outputs"].items()}
        assert shapes == outputs, (name, shapes)
        line = next(ln for ln in run["stdout"].splitlines() if ln.startswith("inputs ("))
        for key, shape in inputs.items():
            assert f"{key} {shape}" in line, (name, line)
        assert words in _summary(run), (name, _summary(run))
    assert pipeline.demos["ast"]["result"]["outputs"]["logits"]["dtype"] == "float32"
    for name in ("mamba", "jamba"):
        assert "PyTorch scan" in pipeline.demos[name]["stdout"], name
    assert "PyTorch scan" not in pipeline.demos["qwen3-moe"]["stdout"]


def test_bad_family_specs_fail_in_one_line(pipeline: Pipeline) -> None:
    bare = pipeline.demos["bare-forecaster"]
    assert bare["rc"] == 1 and bare["result"]["error_kind"] == "unsupported_model"
    assert "none of the time_series_forecasting outputs" in bare["result"]["error"]
    pooling = pipeline.demos["bad-pooling"]
    assert pooling["rc"] == 1 and "unknown sentence-transformers pooling 'median'" in pooling["result"]["error"]
    assert "Traceback" not in bare["stderr"] + pooling["stderr"]


def test_one_benchmark_run_per_family_group(pipeline: Pipeline) -> None:
    for name, dtype in BENCHMARKED.items():
        code, result, stdout, stderr = pipeline.benchmarks[name]
        assert code == 0 and result["verdict"] == "pass" and result["dtype"] == dtype, (
            name,
            stdout[-1500:],
            stderr[-1500:],
        )
    directory = pipeline.contexts["patchtst"].adaptation_dir
    metrics = json.loads((directory / pipeline.benchmarks["patchtst"][1]["metrics"]).read_text())
    applied = metrics["accuracy"]["outputs"]["prediction_outputs"]["applied"]
    assert applied["max_abs_err_scaled_max"] == 0.125  # the forecasting row: twice the bfloat16 standard
    # The gate's accuracy recomputation (not its timing re-measurement) applies the same family row.
    recomputed = recompute(find_metrics(directory), directory / "adaptation.json", pipeline.python)
    assert recomputed and all(not r["problems"] for r in recomputed.values()), recomputed
    jamba = json.loads(
        (pipeline.contexts["jamba"].adaptation_dir / pipeline.benchmarks["jamba"][1]["metrics"]).read_text()
    )
    assert jamba["accuracy"]["float64_reference"] is True  # MoE experts run eagerly in float64
    assert "experts run eagerly" in json.dumps(jamba)
    outputs = jamba["accuracy"]["outputs"]
    assert outputs["logits"]["metrics"]["max_abs_err"] == 0.0  # the PyTorch scan is deterministic on CPU
    assert outputs["routing.0"]["kind"] == "label" and outputs["routing.0"]["metrics"]["match_rate"] == 1.0
    assert outputs["routing.0"]["metrics"]["route_flips"] == 0.0 and jamba["accuracy"]["diagnosis"] == []


def test_near_tie_route_flip_is_named_in_the_diagnosis(pipeline: Pipeline) -> None:
    directory = pipeline.contexts["jamba"].adaptation_dir
    outputs_file = directory / pipeline.benchmarks["jamba"][1]["metrics"].replace(
        "benchmark_metrics_", "outputs_"
    ).replace(".json", ".pt")
    proc = subprocess.run(
        [str(pipeline.python), str(HERE / "near_tie.py"), str(RUNTIME_PARENT), str(outputs_file)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    cases = json.loads(proc.stdout)
    tie = cases["near_tie"]
    assert (
        tie["outputs"]["routing.0"]["verdict"] == "pass"
        and tie["outputs"]["routing.0"]["metrics"]["route_flips"] == 1.0
    )
    assert any("at a near-tie" in line and line.startswith("routing.0: 1 of") for line in tie["diagnosis"]), tie[
        "diagnosis"
    ]
    assert any(line.startswith("logits differ after near-tie route flips in routing.0") for line in tie["diagnosis"])
    assert tie["verdict"] == "fail" and tie["failed_outputs"] == ["logits"]
    clear = cases["clear"]
    assert clear["outputs"]["routing.0"]["verdict"] == "fail"
    assert any("clear margin" in reason for reason in clear["outputs"]["routing.0"]["reasons"])
    assert any("a real routing difference" in line for line in clear["diagnosis"])
