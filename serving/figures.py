"""The serving figures and the acceptance verdict, as pure functions of the saved exchanges and the
package's reference: the stage derives them after its run and the gate recomputes them the same way.

Timing figures come from the saved timestamps: TTFT is the first streamed chunk carrying a token,
TPOT the time between the first and the last token over the tokens after the first, throughput the
concurrent group's output tokens over its slowest request's time (they are sent at once).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from serving.accept import STREAMED, Exchange
from serving.bench import bench_figures, bench_problems

# Served embeddings in float32 equal the reference's up to summation order; lower precisions drift.
COSINE_BOUND = {"float32": 0.999, "bfloat16": 0.99, "float16": 0.99}
# Served class probabilities and scores (in [0, 1]): the largest absolute difference from the
# reference's. float32 differs in summation order only (~1e-7 measured); 16 bits carry ~3 digits.
PROBABILITY_TOLERANCE = {"float32": 1e-4, "bfloat16": 2e-2, "float16": 2e-2}
POOLED = ("embeddings", "classify", "score")  # the kind of a pooling family's batch exchange


def _ok(exchange: Exchange) -> bool:
    return int(exchange.get("status") or 0) == 200


def response_tokens(exchange: Exchange) -> list[int] | None:
    """The completion's token ids (a streamed one reassembled from its chunks); None without an answer."""
    if not _ok(exchange):
        return None
    if exchange["kind"] in STREAMED:
        tokens: list[int] = []
        for chunk in exchange.get("chunks") or []:
            for choice in chunk["data"].get("choices") or []:
                tokens += choice.get("token_ids") or []
        return tokens
    choices = (exchange.get("response") or {}).get("choices") or [{}]
    ids = choices[0].get("token_ids")
    return list(ids) if isinstance(ids, list) else None


def response_rows(exchange: Exchange) -> list[list[float]] | None:
    """A pooling answer's rows by index: embeddings, class probabilities (/classify) or [score] (/score)."""
    if not _ok(exchange):
        return None
    data = sorted((exchange.get("response") or {}).get("data") or [], key=lambda d: d.get("index", 0))
    return [
        list(d["embedding"]) if "embedding" in d else list(d["probs"]) if "probs" in d else [float(d["score"])]
        for d in data
    ] or None


def activated(logits: list[float], config: dict[str, Any]) -> list[float]:
    """The reference logits through vLLM's default classifier activation (vllm 0.32.0
    `pooler.activations.get_act_fn`, for a config without a sentence-transformers activation):
    identity for regression, sigmoid per label for multi-label or a single label, else softmax."""
    problem = config.get("problem_type") or ""
    if problem == "regression":
        return list(logits)
    if problem == "multi_label_classification" or len(logits) < 2:
        return [1 / (1 + math.exp(-x)) for x in logits]
    top = max(logits)
    exps = [math.exp(x - top) for x in logits]
    return [e / sum(exps) for e in exps]


def reference_rows(reference: dict[str, Any]) -> list[list[float]]:
    """What the served rows must equal: the reference embeddings, or its logits activated."""
    if "embeddings" in reference:
        return [list(row) for row in reference["embeddings"]]
    return [activated(row, reference["config"]) for row in reference["logits"]]


def row_close(kind: str, served: list[float], expected: list[float], dtype: str) -> bool:
    """One served row against the reference's: an embedding by cosine, class probabilities or a
    score by the largest absolute difference."""
    if len(served) != len(expected):
        return False
    if kind == "embeddings":
        return cosine(served, expected) >= COSINE_BOUND[dtype]
    return max_abs_diff(served, expected) <= PROBABILITY_TOLERANCE[dtype]


def max_abs_diff(a: list[float], b: list[float]) -> float:
    return max((abs(x - y) for x, y in zip(a, b)), default=0.0)


def cosine(a: list[float], b: list[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b))
    norm = math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b))
    return dot / norm if norm else 0.0


def first_divergence(served: list[int] | None, expected: list[int]) -> int:
    """The first position where the served tokens differ from the reference; -1 when equal."""
    if served is None:
        return 0
    for i, (a, b) in enumerate(zip(served, expected)):
        if a != b:
            return i
    return -1 if len(served) == len(expected) else min(len(served), len(expected))


def _stream_timing(exchange: Exchange) -> tuple[float, float] | None:
    """(TTFT, TPOT) in seconds of a streamed exchange, from its chunks' timestamps."""
    stamps = [
        (c["t"], sum(len(ch.get("token_ids") or []) for ch in c["data"].get("choices") or []))
        for c in exchange.get("chunks") or []
    ]
    stamps = [(t, n) for t, n in stamps if n]
    if not stamps:
        return None
    tokens = sum(n for _, n in stamps)
    tpot = (stamps[-1][0] - stamps[0][0]) / (tokens - 1) if tokens > 1 else 0.0
    return stamps[0][0], tpot


def _robustness(exchanges: list[Exchange], matches: Callable[[Exchange], bool]) -> dict[str, float]:
    """Concurrent requests and an over-length prompt; `matches` says whether an answer is the expected one."""
    group = [e for e in exchanges if e["kind"] == "concurrent"]
    over = next(e for e in exchanges if e["kind"] == "overlength")
    after = next(e for e in exchanges if e["kind"] == "after")
    slowest = max((e["elapsed_s"] for e in group), default=0.0)
    return {
        "concurrent_requests": float(len(group)),
        "concurrent_answered": float(sum(_ok(e) for e in group)),
        "concurrent_equal": float(all(matches(e) for e in group)),
        "requests_per_s": len(group) / slowest if slowest else 0.0,
        "overlength_status": float(over.get("status") or 0),
        "overlength_rejected": float(400 <= int(over.get("status") or 0) < 500),
        "served_after_overlength": float(_ok(after) and matches(after)),
    }


def serving_figures(
    exchanges: list[Exchange],
    reference: dict[str, Any],
    dtype: str,
    cold_start_s: float,
    bench: dict[str, Any] | None = None,
    peak_rss_bytes: int = 0,
) -> dict[str, float]:
    """Every figure of one acceptance run, from its saved exchanges, the reference, the saved output
    of `vllm bench serve` and the server's measured cold start and peak memory."""
    figures: dict[str, float] = {"cold_start_s": cold_start_s}
    if peak_rss_bytes:
        figures["peak_memory_mb"] = peak_rss_bytes / 2**20
    figures.update(bench_figures((bench or {}).get("runs") or {}))
    if "tokens" in reference:
        expected = dict(enumerate(reference["tokens"]))
        greedy = [e for e in exchanges if e["kind"] == "greedy"]
        divergences = [first_divergence(response_tokens(e), expected[e["index"]]) for e in greedy]
        served = {e["index"]: response_tokens(e) for e in greedy}
        streamed = next(e for e in exchanges if e["kind"] == "stream")
        timing = _stream_timing(streamed)
        group = [e for e in exchanges if e["kind"] == "concurrent"]
        slowest = max((e["elapsed_s"] for e in group), default=0.0)
        out_tokens = sum(len(response_tokens(e) or []) for e in group)
        for kind in ("chat", "chat_stream"):  # the template's prompt, answered as the reference does (also streamed)
            chat = next((e for e in exchanges if e["kind"] == kind), None)
            if chat is not None and "chat" in reference:
                figures[f"{kind}_equal"] = float(response_tokens(chat) == reference["chat"]["tokens"])
        figures.update(
            {
                "greedy_exact_match": sum(d == -1 for d in divergences) / len(divergences),
                "first_divergence": float(min((d for d in divergences if d >= 0), default=-1)),
                "stream_equal": float(response_tokens(streamed) == expected[streamed["index"]]),
                "ttft_ms": 1000 * timing[0] if timing else -1.0,
                "tpot_ms": 1000 * timing[1] if timing else -1.0,
                "output_tokens_per_s": out_tokens / slowest if slowest else 0.0,
                # batched with others, a prompt's answer is the one it got alone
                **_robustness(exchanges, lambda e: response_tokens(e) == served[e["index"]]),
            }
        )
        return figures
    kind = next(e["kind"] for e in exchanges if e["kind"] in POOLED)
    batch = next(e for e in exchanges if e["kind"] == kind)
    rows = response_rows(batch) or []
    wanted = reference_rows(reference)
    complete = len(rows) == len(wanted)

    def matches(e: Exchange) -> bool:  # one text's (or pair's) answer, as close to the reference as the batch's
        one = response_rows(e)
        return one is not None and row_close(kind, one[0], wanted[e["index"]], dtype)

    if kind == "embeddings":
        cosines = [cosine(s, r) for s, r in zip(rows, wanted)]
        figures["embedding_cosine_min"] = min(cosines) if cosines and complete else 0.0
        figures["embedding_latency_ms"] = 1000 * batch["elapsed_s"]
    else:  # probabilities and scores lie in [0, 1]: 1 is the worst difference, also for a missing answer
        diffs = [max_abs_diff(s, r) if len(s) == len(r) else 1.0 for s, r in zip(rows, wanted)]
        figures[f"{kind}_max_abs_diff"] = max(diffs) if diffs and complete else 1.0
        figures[f"{kind}_latency_ms"] = 1000 * batch["elapsed_s"]
        if kind == "classify":  # the predicted class of every text, as the reference's
            figures["classify_labels_equal"] = float(
                complete and all(s.index(max(s)) == r.index(max(r)) for s, r in zip(rows, wanted))
            )
    figures.update(_robustness(exchanges, matches))
    return figures


def acceptance_problems(figures: dict[str, float], dtype: str, bench: dict[str, Any] | None = None) -> list[str]:
    """What fails the acceptance (empty: accepted)."""
    problems = []
    if "greedy_exact_match" in figures:
        if dtype == "float32" and figures["greedy_exact_match"] < 1.0:
            problems.append(
                f"served greedy tokens differ from the CPU float32 reference (exact match "
                f"{figures['greedy_exact_match']:.2f}, first divergence at token "
                f"{figures['first_divergence']:.0f})"
            )
        if dtype == "float32" and figures.get("chat_equal", 1.0) != 1.0:
            problems.append("the chat endpoint's tokens differ from the reference's for the chat template's prompt")
        if figures.get("chat_stream_equal", 1.0) != 1.0:
            problems.append("the streamed chat response does not reassemble to the non-streamed chat's tokens")
        if figures["stream_equal"] != 1.0:
            problems.append("the streamed response does not reassemble to the reference tokens")
    elif "embedding_cosine_min" in figures:
        if figures["embedding_cosine_min"] < COSINE_BOUND[dtype]:
            problems.append(
                f"served embeddings' cosine with the reference {figures['embedding_cosine_min']:.6f} "
                f"< {COSINE_BOUND[dtype]}"
            )
    else:
        kind = "classify" if "classify_max_abs_diff" in figures else "score"
        if figures[f"{kind}_max_abs_diff"] > PROBABILITY_TOLERANCE[dtype]:
            what = "class probabilities" if kind == "classify" else "scores"
            problems.append(
                f"served {what} differ from the reference's by {figures[f'{kind}_max_abs_diff']:.2e} "
                f"> {PROBABILITY_TOLERANCE[dtype]:g}"
            )
    if figures["concurrent_answered"] < figures["concurrent_requests"] or figures["concurrent_equal"] != 1.0:
        problems.append(
            f"{figures['concurrent_answered']:.0f} of {figures['concurrent_requests']:.0f} concurrent "
            "requests answered with the reference's answer"
        )
    if figures["overlength_rejected"] != 1.0:
        problems.append(f"a prompt over the max model length got {figures['overlength_status']:.0f}, not a 4xx")
    if figures["served_after_overlength"] != 1.0:
        problems.append("the server did not answer correctly after the over-length prompt")
    return problems + bench_problems((bench or {}).get("runs") or {}, figures)
