"""Tiny models with saved weights and a tokenizer (tests/support/weighted_models.py), checked
against what transformers itself answers on the same weights; all runs share one torch process.

- demo.py reads like a result: a causal LM generates and decodes, a classifier names its label;
  a dry run says its outputs come from random weights.
- An image answers in words: a VLM's greedy text about a PNG and a CLIP model's best candidate
  label with its probability, equal to transformers' own; bad image input is one line.
- Library parity through transformers' pipelines (ab_runtime.parity): the text-classification
  pipeline's raw scores and the feature-extraction pipeline's hidden states equal the package's
  outputs; a config override the library does not apply is caught with exit 1.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.runtime.rt_support import run_batch, write_spec
from tests.support.weighted_models import REQUEST

CLASSIFIER, GPT2 = "tiny-bert-classifier", "tiny-gpt2"


@pytest.fixture(scope="module")
def runs(torch_python: Path, weighted_models: dict, tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict]:
    root = tmp_path_factory.mktemp("weighted-specs")

    def spec(name: str, model: str, family: str, model_class: str, **extra: Any) -> str:
        return write_spec(
            root,
            name,
            {
                "name": name,
                "model": {"model_id": f"tiny/{model}", "source": "local", "path": weighted_models[model]["path"]},
                "task_family": family,
                "model_class": model_class,
                "dtype": {"target": "float32"},
                **extra,
            },
        )

    gpt2 = spec("gpt2", GPT2, "causal_lm", "GPT2LMHeadModel")
    bare = shutil.copytree(
        weighted_models[GPT2]["path"],
        root / "gpt2-no-tokenizer",
        ignore=shutil.ignore_patterns("tokenizer*", "special_tokens_map.json"),
    )
    no_tokenizer = write_spec(
        root,
        "bare",
        {
            "name": "bare",
            "model": {"model_id": "tiny/bare", "source": "local", "path": str(bare)},
            "task_family": "causal_lm",
            "model_class": "GPT2LMHeadModel",
        },
    )
    classifier = spec("classifier", CLASSIFIER, "sequence_classification", "BertForSequenceClassification")
    encoder = spec("encoder", CLASSIFIER, "feature_extraction", "BertModel")
    changed = spec(
        "changed",
        CLASSIFIER,
        "sequence_classification",
        "BertForSequenceClassification",
        config_overrides={"layer_norm_eps": 0.5},
    )
    clip = spec("clip", "tiny-clip", "zero_shot_image_classification", "CLIPModel")
    vlm = spec("vlm", "tiny-qwen-vl", "image_text_to_text", "Qwen2_5_VLForConditionalGeneration")
    image, labels = weighted_models["image"]["path"], ",".join(REQUEST["labels"])
    (root / "not-an-image.png").write_text("plain text")
    argvs = {
        "clip": ["--spec", clip, "--device", "cpu", "--image", image, "--labels", labels],
        "vlm": [
            "--spec",
            vlm,
            "--device",
            "cpu",
            "--image",
            image,
            "--text",
            REQUEST["vlm_prompt"],
            "--max-new-tokens",
            str(REQUEST["new_tokens"]),
        ],
        "vlm_dry": ["--spec", vlm, "--device", "cpu", "--dry-run", "--image", image],
        "clip_no_labels": ["--spec", clip, "--device", "cpu", "--image", image],
        "clip_missing_image": [
            "--spec",
            clip,
            "--device",
            "cpu",
            "--image",
            str(root / "nope.png"),
            "--labels",
            labels,
        ],
        "vlm_unreadable_image": ["--spec", vlm, "--device", "cpu", "--image", str(root / "not-an-image.png")],
        "labels_without_image": ["--spec", classifier, "--device", "cpu", "--labels", labels],
        "generated": ["--spec", gpt2, "--device", "cpu", "--max-new-tokens", str(REQUEST["new_tokens"])],
        "labelled": ["--spec", classifier, "--device", "cpu", "--text", REQUEST["text"]],
        "dry": ["--spec", gpt2, "--device", "cpu", "--dry-run"],
        "bad": ["--spec", gpt2, "--device", "cpu", "--max-new-tokens", "0"],
        "no_tokenizer": ["--spec", no_tokenizer, "--device", "cpu"],
        "parity_classifier": {"module": "parity", "argv": ["--spec", classifier]},
        "parity_encoder": {"module": "parity", "argv": ["--spec", encoder]},
        "parity_changed": {"module": "parity", "argv": ["--spec", changed]},
    }
    return dict(zip(argvs, run_batch(torch_python, list(argvs.values()))))


def test_causal_lm_generates_classifier_names_its_label_dry_run_says_random(runs: dict, weighted_models: dict) -> None:
    generated = runs["generated"]  # no --text: the default prompt, which is REQUEST's
    assert generated["rc"] == 0, generated["stderr"][-2000:]
    answer = generated["result"]["answer"]
    expected = weighted_models[GPT2]["continuation"]  # transformers' generate + decode on the same weights
    assert answer["kind"] == "generation" and answer["prompt"] == REQUEST["prompt"] and answer["text"] == expected
    assert 1 <= len(answer["token_ids"]) <= REQUEST["new_tokens"] and expected.strip()
    assert f"answer: {REQUEST['prompt']!r} -> {expected!r}" in generated["stdout"]
    assert "random weights" not in generated["stdout"]

    labelled = runs["labelled"]
    assert labelled["rc"] == 0, labelled["stderr"][-2000:]
    label = weighted_models[CLASSIFIER]["label"]  # the text-classification pipeline's label of the text
    assert labelled["result"]["answer"]["kind"] == "summary" and f"({label})" in labelled["result"]["answer"]["text"]
    assert f"answer: on {REQUEST['text']!r}: predicted label: " in labelled["stdout"]

    dry = runs["dry"]
    assert dry["rc"] == 0 and dry["result"]["mode"] == "dry_run"
    assert dry["result"]["answer"]["kind"] == "random_weights" and "answer:" not in dry["stdout"]
    assert "note: these outputs come from random weights" in dry["stdout"]

    bare = runs["no_tokenizer"]  # real weights, no tokenizer: the run stands, there is no answer to give
    assert bare["rc"] == 0 and bare["result"]["mode"] == "pretrained" and bare["result"]["answer"] is None
    assert "answer: none (the model ships no usable Tokenizer" in bare["stdout"]

    bad = runs["bad"]
    assert bad["rc"] == 1 and bad["result"]["ok"] is False
    assert (
        bad["stderr"].strip() == "error: bad arguments: argument --max-new-tokens: expected a positive integer, got '0'"
    )


def test_pipeline_parity_equal_and_a_changed_config_is_caught(runs: dict) -> None:
    for name, library in (
        ("parity_classifier", "transformers text-classification pipeline"),
        ("parity_encoder", "transformers feature-extraction pipeline"),
    ):
        run, report = runs[name], runs[name]["result"]
        assert run["rc"] == 0, run["stdout"][-2000:] + run["stderr"][-2000:]
        assert report["checked"] and report["ok"] and report["library"] == library and report["inputs"] == 3
        assert report["max_abs_err"] <= 1e-4 and report["min_cosine"] >= 0.99999
        assert f"parity: {library}: equal within float32 tolerance" in run["stdout"]
    run, report = runs["parity_changed"], runs["parity_changed"]["result"]
    assert run["rc"] == 1 and report["checked"] and not report["ok"] and report["max_abs_err"] > 1e-4
    assert report["reason"].startswith("outputs differ from transformers text-classification pipeline: max abs err")


def test_vlm_and_clip_answer_an_image_in_words(runs: dict, weighted_models: dict) -> None:
    image = weighted_models["image"]["path"]
    clip = runs["clip"]
    assert clip["rc"] == 0, clip["stderr"][-2000:]
    answer, expected = clip["result"]["answer"], weighted_models["tiny-clip"]  # transformers' zero-shot pipeline
    assert answer["kind"] == "zero_shot_label" and answer["labels"] == REQUEST["labels"]
    assert answer["label"] == expected["label"] and abs(answer["probability"] - expected["score"]) < 1e-4
    assert abs(sum(answer["probabilities"]) - 1.0) < 1e-4  # CLIP: a softmax over the candidate texts
    assert f"answer: {image} is {expected['label']!r} (probability " in clip["stdout"]
    assert "random weights" not in clip["stdout"]

    vlm = runs["vlm"]
    assert vlm["rc"] == 0, vlm["stderr"][-2000:]
    answer = vlm["result"]["answer"]
    assert answer["kind"] == "generation" and answer["prompt"] == REQUEST["vlm_prompt"]
    assert answer["text"] == weighted_models["tiny-qwen-vl"]["continuation"] and answer["text"].strip()
    assert "image + text: qwen2_5_vl image processor" not in vlm["stdout"]  # the real image, not a seeded one
    assert "pixel_values [48, 96], image_grid_thw [1, 3]" in vlm["stdout"]
    assert f"answer: on {image} {REQUEST['vlm_prompt']!r} -> {answer['text']!r}" in vlm["stdout"]

    dry = runs["vlm_dry"]
    assert dry["rc"] == 0 and dry["result"]["answer"]["kind"] == "random_weights", dry["stderr"][-2000:]
    assert "note: these outputs come from random weights" in dry["stdout"] and "answer:" not in dry["stdout"]


@pytest.mark.parametrize(
    "name,error",
    [
        ("clip_no_labels", 'zero-shot image classification needs candidate texts: --labels "a cat,a dog"'),
        ("clip_missing_image", "no such file: "),
        ("vlm_unreadable_image", "cannot read image "),
        ("labels_without_image", "--labels (candidate texts) go with --image, for zero-shot image classification only"),
    ],
)
def test_bad_image_input_is_one_line(name: str, error: str, runs: dict) -> None:
    run = runs[name]
    assert run["rc"] == 1 and run["result"]["ok"] is False and run["result"]["error_kind"] == "spec_error"
    assert (
        error in run["result"]["error"] and "Traceback" not in run["stderr"]
    )  # loading's progress bars go to stderr too
    assert run["stderr"].strip().splitlines()[-1] == f"error: {run['result']['error']}"
