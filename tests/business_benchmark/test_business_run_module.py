"""ab_runtime.business, the model side of the business benchmark, run directly on tiny models.

The classification, generation / perplexity, seq2seq and embedding paths each write their
predictions and timing; the greedy decoder is the runtime's (cached), equal to a full re-run per
token; a bad set or task is one `error:` line and exit 2. All in one process of the shared torch
env (bench/support/torch_env.py), on the framework's copy of the runtime.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from business_benchmark.datasets import DATA_DIR
from business_benchmark.inner.rerun import RUNTIME_PARENT  # the framework's runtime, as the gate runs it
from tests.business_benchmark.business_support import demo_dir, make_adaptation

JOBS = Path(__file__).resolve().parent / "business_module_jobs.py"
MODELS = {  # name -> (demo model, family, class, pooling, evaluations)
    "classifier": (
        "tiny-bert-classifier",
        "sequence_classification",
        "BertForSequenceClassification",
        None,
        ["ab-sentiment-en:classification"],
    ),
    "gpt2": ("tiny-gpt2", "causal_lm", "GPT2LMHeadModel", None, ["ab-text-en:perplexity", "ab-prompts-en:generation"]),
    "t5": ("tiny-t5", "seq2seq", "T5ForConditionalGeneration", None, ["ab-seq2seq-en:seq2seq"]),
    "embedder": (
        "tiny-bert",
        "feature_extraction",
        "BertModel",
        "mean",
        ["ab-retrieval-en:retrieval", "ab-sts-en:similarity"],
    ),
}
BAD = {
    "missing set": ["--eval", "no-such-set:retrieval"],
    "unknown task": ["--eval", "ab-text-en:guessing"],
    "no evaluation": [],
}
ITEMS = 2


@pytest.fixture(scope="module")
def ran(tmp_path_factory: pytest.TempPathFactory, python: Path) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("business-module")
    dirs = {
        key: make_adaptation(root, key, demo_dir(model), family, cls, pooling=pooling)
        for key, (model, family, cls, pooling, _) in MODELS.items()
    }
    jobs: list[dict[str, Any]] = [
        {
            "dir": str(dirs[key]),
            "argv": [
                "--device",
                "cpu",
                "--dtype",
                "bfloat16",
                "--out",
                "predictions.json",
                "--max-items",
                str(ITEMS),
                *(f"--eval={e}" for e in MODELS[key][4]),
            ],
        }
        for key in MODELS
    ]
    jobs += [
        {"dir": str(dirs["gpt2"]), "argv": ["--device", "cpu", "--out", "bad.json", *argv]} for argv in BAD.values()
    ]
    jobs.append({"greedy": str(dirs["gpt2"])})
    proc = subprocess.run(
        [str(python), str(JOBS), str(RUNTIME_PARENT), json.dumps(jobs)], capture_output=True, text=True, timeout=600
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    assert len(results) == len(jobs), proc.stdout[-3000:]
    keys = [*MODELS, *BAD, "greedy"]
    return {"dirs": dirs, **dict(zip(keys, results))}


def _predictions(ran: dict[str, Any], key: str) -> dict[str, Any]:
    run = ran[key]
    assert run["code"] == 0, run["stderr"][-3000:]
    result = run["result"]
    assert result["ok"] and result["device"] == "cpu" and result["dtype"] == "bfloat16"
    assert result["mode"] == "dry_run" and result["tokenizer"] == "byte-fallback"
    return json.loads((ran["dirs"][key] / "predictions.json").read_text())


def _evaluation(predictions: dict[str, Any], name: str) -> dict[str, Any]:
    ev = next(ev for ev in predictions["evaluations"] if ev["set"] == name)
    assert len(ev["items"]) == ITEMS
    assert ev["set_sha256"] == hashlib.sha256((DATA_DIR / f"{name}.jsonl").read_bytes()).hexdigest()
    assert ev["timing"]["target_s"] > 0 and ev["timing"]["reference_s"] > 0
    return ev


def test_classification_predicts_labels_and_logits_on_both_sides(ran: dict[str, Any]) -> None:
    predictions = _predictions(ran, "classifier")
    assert predictions["format"] == "ascendbridge.business_predictions/1"
    assert predictions["reference"] == {"device": "cpu", "dtype": "float32"} and predictions["dtype"] == "bfloat16"
    assert predictions["environment"]["torch_threads"] == 1 and predictions["environment"]["torch"].startswith("2.")
    ev = _evaluation(predictions, "ab-sentiment-en")
    for item in ev["items"]:
        for side in ("reference", "target"):
            assert len(item[side]["logits"]) == 3 and item[side]["label"] in (0, 1, 2)
            assert item[side]["label"] == max(range(3), key=lambda i: item[side]["logits"][i])
    assert ev["timing"]["generated_tokens"] == 0


def test_causal_lm_perplexity_and_greedy_generation(ran: dict[str, Any]) -> None:
    predictions = _predictions(ran, "gpt2")
    text = _evaluation(predictions, "ab-text-en")
    assert all(
        item[side]["nll"] > 0 and item[side]["tokens"] > 0 for item in text["items"] for side in ("reference", "target")
    )
    prompts = _evaluation(predictions, "ab-prompts-en")
    assert all(len(item[side]["tokens"]) == 8 for item in prompts["items"] for side in ("reference", "target"))
    assert prompts["timing"]["generated_tokens"] == 8 * ITEMS


def test_seq2seq_decodes_through_the_encoder_decoder_path(ran: dict[str, Any]) -> None:
    ev = _evaluation(_predictions(ran, "t5"), "ab-seq2seq-en")
    assert all(len(item[side]["tokens"]) == 8 for item in ev["items"] for side in ("reference", "target"))
    assert ev["timing"]["generated_tokens"] == 8 * ITEMS


def test_embeddings_are_pooled_once_per_text(ran: dict[str, Any]) -> None:
    predictions = _predictions(ran, "embedder")
    assert predictions["pooling"] == "mean"
    retrieval = _evaluation(predictions, "ab-retrieval-en")
    sts = _evaluation(predictions, "ab-sts-en")
    hidden = len(retrieval["items"][0]["reference"]["embedding"])
    assert hidden == json.loads((demo_dir("tiny-bert") / "config.json").read_text())["hidden_size"]
    assert all(len(item["target"][key]) == hidden for item in sts["items"] for key in ("embedding1", "embedding2"))


def test_the_cached_greedy_decoder_gives_the_tokens_of_a_full_rerun(ran: dict[str, Any]) -> None:
    greedy = ran["greedy"]
    assert len(greedy["cached"]) == 8 and greedy["cached"] == greedy["full"]
    assert greedy["seconds"] > 0  # the decoder's phases are clocked into the side's seconds


@pytest.mark.parametrize(
    "case,expected",
    [
        ("missing set", "evaluation set business_data/no-such-set.jsonl not found"),
        ("unknown task", "--eval ab-text-en:guessing: unknown task 'guessing'"),
        ("no evaluation", "give at least one --eval SET:TASK"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(ran: dict[str, Any], case: str, expected: str) -> None:
    run = ran[case]
    assert run["code"] == 2
    assert len(run["stderr"].strip().splitlines()) == 1 and run["stderr"].startswith(f"error: {expected}")
    result = run["result"]
    assert result["ok"] is False and result["error"].startswith(expected)
    assert not (ran["dirs"]["gpt2"] / "bad.json").exists()
