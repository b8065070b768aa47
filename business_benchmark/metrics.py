"""Task metrics per family, computed from saved predictions (so the gate can recompute them).

`evaluate(evaluation, items, real_weights)` returns, for one evaluation:
- `task`: task scores of the target and of the reference against the set's gold answers, only
  with real weights (a config-initialised model has no task skill worth scoring);
- `agreement`: target against the reference on the same items (always).
No torch here: predictions are plain JSON; chrF/BLEU come from sacrebleu, WER from jiwer.
"""

from __future__ import annotations

import math
import re
import string
from collections import Counter
from collections.abc import Callable
from typing import Any

import numpy as np

Metrics = dict[str, Any]
TOP_K = 10


# ------------------------------------------------------------------------------- small helpers
def _mean(values: list[float]) -> float | None:
    return float(sum(values) / len(values)) if values else None


def _cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Row-wise cosine similarity."""
    na = np.linalg.norm(a, axis=1)
    nb = np.linalg.norm(b, axis=1)
    return (a * b).sum(axis=1) / np.maximum(na * nb, 1e-12)


def _normalise(rows: np.ndarray) -> np.ndarray:
    return rows / np.maximum(np.linalg.norm(rows, axis=1, keepdims=True), 1e-12)


def _ranks(values: list[float]) -> np.ndarray:
    """Average ranks (ties share the mean rank), as Spearman's rho needs."""
    order = np.argsort(values, kind="mergesort")
    ranks = np.empty(len(values))
    sorted_vals = np.asarray(values)[order]
    i = 0
    while i < len(values):
        j = i
        while j + 1 < len(values) and sorted_vals[j + 1] == sorted_vals[i]:
            j += 1
        ranks[order[i : j + 1]] = (i + j) / 2.0
        i = j + 1
    return ranks


def spearman(a: list[float], b: list[float]) -> float | None:
    if len(a) < 2:
        return None
    ra, rb = _ranks(a), _ranks(b)
    if ra.std() == 0 or rb.std() == 0:
        return None
    return float(np.corrcoef(ra, rb)[0, 1])


def _embedding_agreement(target: np.ndarray, reference: np.ndarray) -> Metrics:
    cos = _cosines(target, reference)
    return {"embedding_cosine_mean": float(cos.mean()), "embedding_cosine_min": float(cos.min())}


def _normalise_answer(text: str) -> list[str]:
    """SQuAD's answer normalisation: lower case, no punctuation, no articles, single spaces."""
    text = "".join(ch for ch in text.lower() if ch not in set(string.punctuation))
    return re.sub(r"\b(a|an|the)\b", " ", text).split()


def answer_f1(prediction: str, gold: str) -> float:
    pred, ref = _normalise_answer(prediction), _normalise_answer(gold)
    common = sum((Counter(pred) & Counter(ref)).values())
    if not pred or not ref:
        return float(pred == ref)
    if common == 0:
        return 0.0
    precision, recall = common / len(pred), common / len(ref)
    return 2 * precision * recall / (precision + recall)


def answer_em(prediction: str, gold: str) -> float:
    return float(_normalise_answer(prediction) == _normalise_answer(gold))


def _pair(target: Any, reference: Any) -> dict[str, Any]:
    return {"target": target, "reference": reference}


# ------------------------------------------------------------------------------------ per task
def perplexity(items: list[dict[str, Any]], gold: dict[str, dict[str, Any]], real: bool) -> tuple[Metrics, Metrics]:
    def ppl(which: str) -> float:
        nll = sum(float(it[which]["nll"]) for it in items)
        tokens = sum(int(it[which]["tokens"]) for it in items)
        return math.exp(nll / max(tokens, 1))

    target, reference = ppl("target"), ppl("reference")
    task = {"perplexity": _pair(target, reference)} if real else {}
    return task, {"perplexity_ratio": target / reference if reference else None}


def _token_agreement(items: list[dict[str, Any]]) -> Metrics:
    exact, matched, total, divergences = 0, 0, 0, []
    for it in items:
        t, r = list(it["target"]["tokens"]), list(it["reference"]["tokens"])
        exact += int(t == r)
        first = next((i for i, (a, b) in enumerate(zip(t, r)) if a != b), min(len(t), len(r)))
        divergences.append(first)
        matched += sum(a == b for a, b in zip(t, r))
        total += max(len(r), 1)
    n = max(len(items), 1)
    return {
        "exact_match": exact / n,
        "token_match_rate": matched / max(total, 1),
        "first_divergence_mean": _mean([float(d) for d in divergences]),
        "first_divergence_min": float(min(divergences)) if divergences else None,
    }


def generation(items: list[dict[str, Any]], gold: dict[str, dict[str, Any]], real: bool) -> tuple[Metrics, Metrics]:
    return {}, _token_agreement(items)


def fill_mask(items: list[dict[str, Any]], gold: dict[str, dict[str, Any]], real: bool) -> tuple[Metrics, Metrics]:
    def accuracy(which: str) -> float:
        pairs = [(p, o) for it in items for p, o in zip(it[which]["predicted"], it[which]["original"])]
        return sum(p == o for p, o in pairs) / max(len(pairs), 1)

    pairs = [(a, b) for it in items for a, b in zip(it["target"]["predicted"], it["reference"]["predicted"])]
    agreement = {"top1_agreement": sum(a == b for a, b in pairs) / max(len(pairs), 1)}
    return ({"masked_token_accuracy": _pair(accuracy("target"), accuracy("reference"))} if real else {}), agreement


def retrieval(items: list[dict[str, Any]], gold: dict[str, dict[str, Any]], real: bool) -> tuple[Metrics, Metrics]:
    docs = [it for it in items if gold[it["id"]].get("kind") == "document"]
    queries = [it for it in items if gold[it["id"]].get("kind") == "query"]
    doc_ids = [d["id"] for d in docs]

    def ranking(which: str) -> list[list[str]]:
        d = _normalise(np.array([x[which]["embedding"] for x in docs], dtype=np.float64))
        q = _normalise(np.array([x[which]["embedding"] for x in queries], dtype=np.float64))
        scores = q @ d.T
        return [[doc_ids[j] for j in np.argsort(-row, kind="mergesort")[:TOP_K]] for row in scores]

    def scores(ranked: list[list[str]]) -> tuple[float, float]:
        top1, rr = 0.0, 0.0
        for query, ranks in zip(queries, ranked):
            relevant = gold[query["id"]]["relevant"]
            top1 += float(ranks[0] == relevant)
            rr += 1.0 / (ranks.index(relevant) + 1) if relevant in ranks else 0.0
        n = max(len(queries), 1)
        return top1 / n, rr / n

    target, reference = ranking("target"), ranking("reference")
    agreement = {
        "retrieval_top1_agreement": sum(t[0] == r[0] for t, r in zip(target, reference)) / max(len(queries), 1)
    }
    emb_t = np.array([x["target"]["embedding"] for x in items], dtype=np.float64)
    emb_r = np.array([x["reference"]["embedding"] for x in items], dtype=np.float64)
    agreement.update(_embedding_agreement(emb_t, emb_r))
    task: Metrics = {}
    if real:
        (t1, tm), (r1, rm) = scores(target), scores(reference)
        task = {"retrieval_top1": _pair(t1, r1), "mrr_at_10": _pair(tm, rm)}
    return task, agreement


def similarity(items: list[dict[str, Any]], gold: dict[str, dict[str, Any]], real: bool) -> tuple[Metrics, Metrics]:
    def cosines(which: str) -> list[float]:
        a = np.array([x[which]["embedding1"] for x in items], dtype=np.float64)
        b = np.array([x[which]["embedding2"] for x in items], dtype=np.float64)
        return [float(c) for c in _cosines(a, b)]

    target, reference = cosines("target"), cosines("reference")
    emb_t = np.array([x["target"][k] for x in items for k in ("embedding1", "embedding2")], dtype=np.float64)
    emb_r = np.array([x["reference"][k] for x in items for k in ("embedding1", "embedding2")], dtype=np.float64)
    agreement = {"similarity_spearman_agreement": spearman(target, reference), **_embedding_agreement(emb_t, emb_r)}
    scores = [float(gold[x["id"]]["score"]) for x in items]
    task = {"similarity_spearman": _pair(spearman(target, scores), spearman(reference, scores))} if real else {}
    return task, agreement


def _macro_f1(predicted: list[str], truth: list[str]) -> float:
    labels = sorted(set(truth))
    f1s = []
    for label in labels:
        tp = sum(p == label and t == label for p, t in zip(predicted, truth))
        fp = sum(p == label and t != label for p, t in zip(predicted, truth))
        fn = sum(p != label and t == label for p, t in zip(predicted, truth))
        f1s.append(2 * tp / (2 * tp + fp + fn) if tp else 0.0)
    return float(sum(f1s) / len(f1s)) if f1s else 0.0


def classification(items: list[dict[str, Any]], gold: dict[str, dict[str, Any]], real: bool) -> tuple[Metrics, Metrics]:
    agreement = {
        "label_agreement": sum(it["target"]["label"] == it["reference"]["label"] for it in items) / max(len(items), 1)
    }
    truth = [str(gold[it["id"]].get("label", "")).lower() for it in items]
    task: Metrics = {}
    names = {str(it[w]["label_name"]).lower() for it in items for w in ("target", "reference")}
    if real and names <= set(truth):  # gold is comparable only when the model's label names are the set's

        def scores(which: str) -> tuple[float, float]:
            predicted = [str(it[which]["label_name"]).lower() for it in items]
            return sum(p == t for p, t in zip(predicted, truth)) / max(len(items), 1), _macro_f1(predicted, truth)

        (ta, tf), (ra, rf) = scores("target"), scores("reference")
        task = {"accuracy": _pair(ta, ra), "macro_f1": _pair(tf, rf)}
    return task, agreement


def token_classification(
    items: list[dict[str, Any]], gold: dict[str, dict[str, Any]], real: bool
) -> tuple[Metrics, Metrics]:
    pairs = [(a, b) for it in items for a, b in zip(it["target"]["labels"], it["reference"]["labels"])]
    return {}, {"label_agreement": sum(a == b for a, b in pairs) / max(len(pairs), 1)}


def question_answering(
    items: list[dict[str, Any]], gold: dict[str, dict[str, Any]], real: bool
) -> tuple[Metrics, Metrics]:
    agreement = {
        "answer_exact_agreement": _mean([answer_em(it["target"]["text"], it["reference"]["text"]) for it in items]),
        "answer_f1_agreement": _mean([answer_f1(it["target"]["text"], it["reference"]["text"]) for it in items]),
    }
    task: Metrics = {}
    if real:

        def scores(which: str, fn: Callable[[str, str], float]) -> float | None:
            return _mean([fn(it[which]["text"], str(gold[it["id"]]["answer"])) for it in items])

        task = {
            "exact_match": _pair(scores("target", answer_em), scores("reference", answer_em)),
            "f1": _pair(scores("target", answer_f1), scores("reference", answer_f1)),
        }
    return task, agreement


def seq2seq(items: list[dict[str, Any]], gold: dict[str, dict[str, Any]], real: bool) -> tuple[Metrics, Metrics]:
    import sacrebleu

    target = [str(it["target"]["text"]) for it in items]
    reference = [str(it["reference"]["text"]) for it in items]
    agreement = {
        "chrf_vs_reference": float(sacrebleu.corpus_chrf(target, [reference]).score),
        "bleu_vs_reference": float(sacrebleu.corpus_bleu(target, [reference]).score),
        **_token_agreement(items),
    }
    targets = [gold[it["id"]].get("target") for it in items]
    golds = [g for g in targets if isinstance(g, str)]
    task: Metrics = {}
    if real and golds and len(golds) == len(targets):
        task = {
            "chrf": _pair(
                float(sacrebleu.corpus_chrf(target, [golds]).score),
                float(sacrebleu.corpus_chrf(reference, [golds]).score),
            ),
            "bleu": _pair(
                float(sacrebleu.corpus_bleu(target, [golds]).score),
                float(sacrebleu.corpus_bleu(reference, [golds]).score),
            ),
        }
    return task, agreement


def image_classification(
    items: list[dict[str, Any]], gold: dict[str, dict[str, Any]], real: bool
) -> tuple[Metrics, Metrics]:
    return {}, {
        "top1_agreement": sum(it["target"]["label"] == it["reference"]["label"] for it in items) / max(len(items), 1)
    }


def speech_seq2seq(items: list[dict[str, Any]], gold: dict[str, dict[str, Any]], real: bool) -> tuple[Metrics, Metrics]:
    import jiwer

    target = [str(it["target"]["text"]) or "<empty>" for it in items]
    reference = [str(it["reference"]["text"]) or "<empty>" for it in items]
    return {}, {"wer_vs_reference": float(jiwer.wer(reference, target)), **_token_agreement(items)}


def outputs_agreement(
    items: list[dict[str, Any]], gold: dict[str, dict[str, Any]], real: bool
) -> tuple[Metrics, Metrics]:
    """No task score (the seeded inputs have no gold): the lowest cosine of a float output's values
    over all items and outputs, and the share of per-position argmaxes (an integer output's
    decisions) the target and the reference agree on."""
    cosines, agree, total = [], 0, 0
    for it in items:
        for name, ref in it["reference"]["outputs"].items():
            tgt = it["target"]["outputs"][name]
            if "values" in ref:
                a, b = np.asarray(tgt["values"], dtype=float), np.asarray(ref["values"], dtype=float)
                cosines.append(1.0 if np.array_equal(a, b) else float(_cosines(a[None], b[None])[0]))
            agree += sum(a == b for a, b in zip(tgt["argmax"], ref["argmax"]))
            total += len(ref["argmax"])
    agreement = {"output_argmax_agreement": agree / max(total, 1)}
    if cosines:
        agreement["output_cosine_min"] = float(min(cosines))
    return {}, agreement


TASKS: dict[str, Callable[[list[dict[str, Any]], dict[str, dict[str, Any]], bool], tuple[Metrics, Metrics]]] = {
    "perplexity": perplexity,
    "generation": generation,
    "fill_mask": fill_mask,
    "retrieval": retrieval,
    "similarity": similarity,
    "classification": classification,
    "token_classification": token_classification,
    "question_answering": question_answering,
    "seq2seq": seq2seq,
    "image_classification": image_classification,
    "speech_seq2seq": speech_seq2seq,
    "outputs_agreement": outputs_agreement,
}
# Task scores where lower is better (the pass rule's direction).
LOWER_IS_BETTER = frozenset({"perplexity"})


def evaluate(
    task: str, items: list[dict[str, Any]], gold: dict[str, dict[str, Any]], real_weights: bool
) -> dict[str, Any]:
    """{"task": {...}, "agreement": {...}} for one evaluation's saved items."""
    if task not in TASKS:
        raise ValueError(f"unknown business task '{task}'")
    if not items:
        raise ValueError(f"{task}: no items")
    scores, agreement = TASKS[task](items, gold, real_weights)
    return {"task": scores, "agreement": agreement}
