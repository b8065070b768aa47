"""One prediction function per business task: what a side (reference or target) answers on one item.

Text tasks read an item of a set (its text through business.text); seeded tasks build the
family's own seeded inputs (images, audio, any family's inputs), as the benchmark does. Every
function returns plain JSON (floats rounded to ROUND decimals) for the predictions file.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import torch

from .. import families
from .pair import NEW_TOKENS, Pair
from .text import ModelTokenizer, Tokenizer, text_limit

FILL_MASK_EVERY = 4  # fill_mask masks every 4th token
ROUND = 6  # decimals kept for saved floats
OUTPUT_VALUES = 512  # leading values of each output kept for the cosine (agreement only, no gold)
ANSWER_SPAN = 30  # longest answer span (tokens) question answering considers
SEEDED_ITEMS = {"image_classification": 16, "speech_seq2seq": 8, "outputs_agreement": 4}
GENERATING_TASKS = ("generation", "seq2seq", "speech_seq2seq")


def ids_tensor(ids: list[int]) -> torch.Tensor:
    return torch.tensor([ids], dtype=torch.long)


def rounded(values: torch.Tensor) -> list[float]:
    return [round(float(v), ROUND) for v in values.detach().to("cpu", torch.float32).reshape(-1)]


def logits_of(out: Any) -> torch.Tensor:
    return out.logits if hasattr(out, "logits") else out[0]


def _ids(pair: Pair, tok: Tokenizer, text: str) -> list[int]:
    return tok.encode(text)[: text_limit(pair.config)]


def _masked_forward(pair: Pair, which: str, ids: list[int]) -> Any:
    return pair.forward(which, input_ids=ids_tensor(ids), attention_mask=torch.ones(1, len(ids), dtype=torch.long))


# ---------------------------------------------------------------------------------- text tasks
def perplexity(pair: Pair, tok: Tokenizer, item: dict[str, Any], which: str) -> dict[str, Any]:
    ids = _ids(pair, tok, item["text"])
    logits = logits_of(pair.forward(which, input_ids=ids_tensor(ids))).float()[0, :-1]
    nll = torch.nn.functional.cross_entropy(logits.cpu(), torch.tensor(ids[1:]), reduction="sum")
    return {"nll": round(float(nll), ROUND), "tokens": len(ids) - 1}


def generation(pair: Pair, tok: Tokenizer, item: dict[str, Any], which: str) -> dict[str, Any]:
    prompt = tok.encode(item["prompt"])[: text_limit(pair.config) - NEW_TOKENS]
    tokens = pair.greedy(which, {"input_ids": ids_tensor(prompt)}, encoder_decoder=False)
    return {"tokens": tokens, "text": tok.decode(tokens)}


def fill_mask(pair: Pair, tok: Tokenizer, item: dict[str, Any], which: str) -> dict[str, Any]:
    ids = _ids(pair, tok, item["text"])
    positions = list(range(1, len(ids) - 1, FILL_MASK_EVERY)) or [0]
    masked = [tok.mask_token_id if i in positions else t for i, t in enumerate(ids)]
    predicted = logits_of(_masked_forward(pair, which, masked))[0].float().argmax(-1)
    return {"predicted": [int(predicted[p]) for p in positions], "original": [ids[p] for p in positions]}


def label_name(config: Any, index: int) -> str:
    labels = getattr(config, "id2label", None) or {}
    return str(labels.get(index, labels.get(str(index), index)))


def classification(pair: Pair, tok: Tokenizer, item: dict[str, Any], which: str) -> dict[str, Any]:
    logits = logits_of(_masked_forward(pair, which, _ids(pair, tok, item["text"])))[0]
    index = int(logits.float().argmax())
    return {"label": index, "label_name": label_name(pair.config, index), "logits": rounded(logits)}


def token_classification(pair: Pair, tok: Tokenizer, item: dict[str, Any], which: str) -> dict[str, Any]:
    logits = logits_of(_masked_forward(pair, which, _ids(pair, tok, item["text"])))
    return {"labels": [int(i) for i in logits[0].float().argmax(-1)]}


def question_answering(pair: Pair, tok: Tokenizer, item: dict[str, Any], which: str) -> dict[str, Any]:
    if isinstance(tok, ModelTokenizer):
        ids = tok.encode_pair(item["question"], item["context"])
    else:
        ids = (tok.encode(item["question"]) + tok.encode(item["context"]))[: text_limit(pair.config)]
    out = _masked_forward(pair, which, ids)
    start, end = out.start_logits[0].float().cpu(), out.end_logits[0].float().cpu()
    scores = start[:, None] + end[None, :]
    upper = torch.triu(torch.ones_like(scores, dtype=torch.bool))
    valid = upper & ~torch.triu(torch.ones_like(scores, dtype=torch.bool), ANSWER_SPAN)
    best = int(scores.masked_fill(~valid, float("-inf")).reshape(-1).argmax())
    s, e = divmod(best, scores.shape[1])
    return {"start": s, "end": e, "text": tok.decode(ids[s : e + 1])}


def seq2seq(pair: Pair, tok: Tokenizer, item: dict[str, Any], which: str) -> dict[str, Any]:
    ids = _ids(pair, tok, item["source"])
    inputs = {"input_ids": ids_tensor(ids), "attention_mask": torch.ones(1, len(ids), dtype=torch.long)}
    tokens = pair.greedy(which, inputs, encoder_decoder=True)
    return {"tokens": tokens, "text": tok.decode(tokens)}


# ----------------------------------------------------------------------------- embedding tasks
def embedding(pair: Pair, tok: Tokenizer, text: str, which: str, pooling: str) -> list[float]:
    """Pooled embedding of one text; a text seen before (sets share sentences) is not re-run."""
    key = (which, text)
    if key not in pair.embeddings:
        ids = _ids(pair, tok, text)
        mask = torch.ones(1, len(ids), dtype=torch.long)
        out = pair.forward(which, input_ids=ids_tensor(ids), attention_mask=mask)
        hidden = out.last_hidden_state if hasattr(out, "last_hidden_state") else out[0]
        pair.embeddings[key] = rounded(families.pool(hidden.float(), mask.to(hidden.device), pooling)[0])
    return pair.embeddings[key]


def retrieval(pair: Pair, tok: Tokenizer, item: dict[str, Any], which: str, pooling: str) -> dict[str, Any]:
    return {"embedding": embedding(pair, tok, item["text"], which, pooling)}


def similarity(pair: Pair, tok: Tokenizer, item: dict[str, Any], which: str, pooling: str) -> dict[str, Any]:
    return {
        "embedding1": embedding(pair, tok, item["sentence1"], which, pooling),
        "embedding2": embedding(pair, tok, item["sentence2"], which, pooling),
    }


# -------------------------------------------------------------------------------- seeded tasks
def seeded_inputs(pair: Pair, spec: Any, index: int) -> dict[str, torch.Tensor]:
    """The family's seeded inputs of item `index` at batch 1 (the benchmark's input builder)."""
    recipe = dataclasses.replace(spec.recipe, batch_size=1)
    return families.get_family(spec.task_family).build_inputs(
        pair.model("reference"), pair.config, recipe, spec.recipe.seed + index
    )


def image_classification(pair: Pair, spec: Any, index: int, which: str) -> dict[str, Any]:
    inputs = seeded_inputs(pair, spec, index)
    if "decoder_input_ids" in inputs:  # vision encoder-decoder: first decoded token
        logits = logits_of(pair.forward(which, **inputs))[0, -1]
    else:
        logits = logits_of(pair.forward(which, pixel_values=inputs["pixel_values"]))[0]
    return {"label": int(logits.float().argmax())}


def speech_seq2seq(pair: Pair, spec: Any, index: int, which: str) -> dict[str, Any]:
    features = {k: v for k, v in seeded_inputs(pair, spec, index).items() if k != "decoder_input_ids"}
    tokens = pair.greedy(which, features, encoder_decoder=True)
    return {"tokens": tokens, "text": " ".join(str(t) for t in tokens)}


def outputs_agreement(pair: Pair, spec: Any, index: int, which: str) -> dict[str, Any]:
    """The family's accuracy outputs on seeded inputs (its own input builder): each float output's
    leading values and per-position argmax, an integer output's (a mask's, a route's) decisions."""
    moved = pair.prepare(which, seeded_inputs(pair, spec, index))
    named = families.get_family(spec.task_family).named_outputs(
        pair.forward(which, **moved),
        moved,
        spec.sentence_transformers_pooling,
        spec.sentence_transformers_normalize,
        pair.config,
    )
    outputs = {}
    for name, value in named.items():
        value = value.detach().cpu()
        if value.is_floating_point():
            outputs[name] = {
                "values": rounded(value.float().flatten()[:OUTPUT_VALUES]),
                "argmax": value.float().argmax(-1).flatten()[:OUTPUT_VALUES].tolist(),
            }
        else:
            outputs[name] = {"argmax": value.flatten()[:OUTPUT_VALUES].tolist()}
    return {"outputs": outputs}


TEXT_TASKS: dict[str, Callable[..., dict[str, Any]]] = {
    "perplexity": perplexity,
    "generation": generation,
    "fill_mask": fill_mask,
    "classification": classification,
    "token_classification": token_classification,
    "question_answering": question_answering,
    "seq2seq": seq2seq,
}
EMBEDDING_TASKS: dict[str, Callable[..., dict[str, Any]]] = {"retrieval": retrieval, "similarity": similarity}
SEEDED_TASKS: dict[str, Callable[..., dict[str, Any]]] = {
    "image_classification": image_classification,
    "speech_seq2seq": speech_seq2seq,
    "outputs_agreement": outputs_agreement,
}
TASKS = (*TEXT_TASKS, *EMBEDDING_TASKS, *SEEDED_TASKS)


def predict(
    pair: Pair, task: str, item: dict[str, Any], which: str, *, tok: Tokenizer, spec: Any, pooling: str
) -> dict[str, Any]:
    """`which`'s prediction of `task` on one item."""
    if task in SEEDED_TASKS:
        return SEEDED_TASKS[task](pair, spec, int(item["index"]), which)
    if task in EMBEDDING_TASKS:
        return EMBEDDING_TASKS[task](pair, tok, item, which, pooling)
    return TEXT_TASKS[task](pair, tok, item, which)
