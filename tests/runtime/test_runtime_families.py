"""Every task family end to end on a tiny real config, held-out architectures, bad specs.

All runs go through ab_runtime.demo.main in ONE torch process (batch_demo.py) to keep the suite
fast; test_runtime_device.py and test_runtime_depth.py run the real demo.py as a process.
"""

from __future__ import annotations

import ast
import json
from pathlib import Path
from typing import Any

import pytest

from ascendbridge.task_families import TASK_FAMILIES
from tests.runtime.rt_support import RUNTIME_PARENT, run_batch, spec_for, write_spec

# family -> {output name: shape} for the tiny configs of tiny_models.py (batch 2, seq 32, dec 8)
EXPECTED = {
    "causal_lm": ("llama", {"logits": [2, 32, 128]}),
    "masked_lm": ("bert-mlm", {"logits": [2, 32, 128]}),
    "feature_extraction": ("bert-st", {"last_hidden_state": [2, 32, 32], "sentence_embedding": [2, 32]}),
    "sequence_classification": ("roberta-cls", {"logits": [2, 3]}),
    "question_answering": ("electra-qa", {"start_logits": [2, 32], "end_logits": [2, 32]}),
    "token_classification": ("distilbert-tok", {"logits": [2, 32, 5]}),
    "seq2seq": ("t5", {"logits": [2, 8, 128], "encoder_last_hidden_state": [2, 32, 32]}),
    "image_classification": ("vit", {"logits": [2, 4]}),
    "speech_seq2seq": ("whisper", {"logits": [2, 8, 128], "encoder_last_hidden_state": [2, 30, 32]}),
    "vision_seq2seq": ("vit-gpt2", {"logits": [2, 8, 128]}),
    # issue 13 (tests/coverage runs them through the stages)
    "ctc_speech_recognition": ("wav2vec2-ctc", {"logits": [2, 798, 32]}),
    "audio_classification": ("ast", {"logits": [2, 3]}),
    "time_series_forecasting": ("patchtst", {"prediction_outputs": [2, 8, 2]}),
    "llm_embedding": ("qwen3-embed", {"sentence_embedding": [2, 32]}),
    "reranker": ("bert-rerank", {"logits": [2, 1]}),
    # --- vision families (issue 13): only the accuracy outputs a user checks, plus derived results ---
    "image_text_to_text": ("qwen2.5-vl", {"logits": [2, 50, 128]}),  # 32 text + 16 image tokens + 2 markers
    "zero_shot_image_classification": (
        "siglip",
        {"logits_per_image": [2, 2], "logits_per_text": [2, 2], "image_embeds": [2, 32], "text_embeds": [2, 32]},
    ),
    "object_detection": ("detr", {"logits": [2, 8, 4], "pred_boxes": [2, 8, 4], "scores": [2, 8]}),
    "semantic_segmentation": ("segformer", {"logits": [2, 3, 8, 8], "mask": [2, 8, 8]}),
    "depth_estimation": ("dpt", {"predicted_depth": [2, 64, 64]}),
    # --- end vision families ---
}


VISION_FAMILY_NAMES = (
    "image_text_to_text",
    "zero_shot_image_classification",
    "object_detection",
    "semantic_segmentation",
    "depth_estimation",
)


def _hf_cache_layout(root: Path, source_dir: Path) -> Path:
    """models--tiny--llama-cache/{refs/main, snapshots/<rev>/config.json}, as huggingface_hub lays it out."""
    repo = root / "models--tiny--llama-cache"
    snapshot = repo / "snapshots" / "0123456789abcdef0123456789abcdef01234567"
    snapshot.mkdir(parents=True)
    (snapshot / "config.json").write_text((source_dir / "config.json").read_text())
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(snapshot.name)
    return root


@pytest.fixture(scope="module")
def runs(
    tiny_models: dict[str, dict[str, Any]], torch_python: Path, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, dict[str, Any]]:
    specs = tmp_path_factory.mktemp("specs")
    argvs: dict[str, list[str]] = {}
    for name, entry in tiny_models.items():
        extra = {"sentence_transformers_pooling": "mean"} if name == "bert-st" else {}
        argvs[name] = ["--dry-run", "--device", "cpu", "--spec", write_spec(specs, name, spec_for(entry, **extra))]
    llama = tiny_models["llama"]
    argvs["llama-again"] = argvs["llama"]
    cache = _hf_cache_layout(tmp_path_factory.mktemp("hf-cache"), Path(llama["path"]))
    cached = spec_for(
        llama, model={"model_id": "tiny/llama-cache", "source": "hf-cache", "path": str(cache), "has_weights": False}
    )
    argvs["llama-hf-cache"] = ["--dry-run", "--spec", write_spec(specs, "cache", cached)]
    capped = spec_for(tiny_models["gemma3-text"], dry_run_max_layers=1)
    argvs["gemma3-capped"] = ["--dry-run", "--spec", write_spec(specs, "capped", capped)]
    moe = spec_for(tiny_models["deepseek-v3"], dry_run_max_layers=1)
    argvs["deepseek-capped"] = ["--dry-run", "--spec", write_spec(specs, "moe", moe)]
    argvs["bf16"] = ["--dry-run", "--dtype", "bfloat16", "--spec", argvs["llama"][-1]]
    bad = {
        "unknown-family": spec_for(llama, task_family="protein_folding"),
        "unknown-class": spec_for(llama, model_class="LlamaForTeleportation"),
        "broken-model": spec_for(llama, config_overrides={"intermediate_size": -1}),
        "no-class": {k: v for k, v in spec_for(llama).items() if k != "model_class"},
        "bad-dtype": spec_for(llama, dtype={"target": "float12"}),
    }
    for name, spec in bad.items():
        argvs[name] = ["--dry-run", "--spec", write_spec(specs, name, spec)]
    (specs / "not-json.json").write_text("{not json")
    argvs["not-json"] = ["--dry-run", "--spec", str(specs / "not-json.json")]
    argvs["missing-spec"] = ["--dry-run", "--spec", str(specs / "nope.json")]
    argvs["bad-flag"] = ["--device", "tpu", "--spec", argvs["llama"][-1]]
    results = run_batch(torch_python, list(argvs.values()))
    return dict(zip(argvs, results))


def _ok(run: dict[str, Any]) -> dict[str, Any]:
    result = run["result"]
    assert run["rc"] == 0 and result and result["ok"], run["stderr"][-2000:] or run["stdout"][-2000:]
    return result


@pytest.mark.parametrize("family", sorted(EXPECTED))
def test_each_family_runs_end_to_end(family: str, runs: dict[str, dict[str, Any]], tiny_models: dict) -> None:
    name, shapes = EXPECTED[family]
    assert tiny_models[name]["family"] == family
    result = _ok(runs[name])
    assert result["task_family"] == family and result["mode"] == "dry_run"
    assert result["device_requested"] == "cpu" and result["device_used"] == "cpu" and result["fallback"] is False
    assert result["layers_built"] == result["layers_total"] and result["depth_reduced"] is False
    for output, shape in shapes.items():
        assert result["outputs"][output]["shape"] == shape, result["outputs"]
    if family in VISION_FAMILY_NAMES:  # these families report exactly the outputs a user checks
        assert set(result["outputs"]) == set(shapes), result["outputs"]
    assert all(stats["finite"] for stats in result["outputs"].values())
    assert not any("past_key_values" in key for key in result["outputs"])
    assert set(result["versions"]) == {"torch", "transformers", "torch_npu"} and result["versions"]["torch"]
    assert "result: " in runs[name]["stdout"]


def test_the_family_registry_matches_the_framework_names() -> None:
    tree = ast.parse((RUNTIME_PARENT / "ab_runtime" / "families.py").read_text())
    literal = next(
        node.value for node in tree.body if isinstance(node, ast.AnnAssign) and node.target.id == "TASK_FAMILIES"
    )
    assert ast.literal_eval(literal) == TASK_FAMILIES
    assert set(EXPECTED) == set(TASK_FAMILIES)


def test_inputs_follow_the_config_and_forward_signature(runs: dict[str, dict[str, Any]]) -> None:
    assert "bbox [2, 32, 4]" in runs["layoutlm"]["stdout"]
    assert "token_type_ids" not in runs["distilbert"]["stdout"]  # DistilBERT has no segment embeddings
    assert "token_type_ids [2, 32]" in runs["bert-mlm"]["stdout"]
    assert "input_features [2, 16, 60]" in runs["whisper"]["stdout"]  # 2 x max_source_positions frames
    assert "input_features [2, 64, 16]" in runs["speech2text"]["stdout"]  # (frames, features) layout
    assert "pixel_values [2, 3, 32, 32]" in runs["vit-gpt2"]["stdout"]
    assert "decoder_input_ids [2, 8]" in runs["t5"]["stdout"]
    assert "input_values [2, 16000]" in runs["wav2vec2"]["stdout"]
    assert "input_ids [2, 32]" in runs["clip"]["stdout"] and "pixel_values [2, 3, 32, 32]" in runs["clip"]["stdout"]
    # a vision-language model runs its text path: no pixel_values, and no stray image token (23, which the seeded draw hits) in the text
    assert (
        "inputs (seeded synthetic (seed 1234)): input_ids [2, 32], attention_mask [2, 32]\n" in runs["llava"]["stdout"]
    )


def test_held_out_architectures_run_or_fail_with_a_diagnosis(
    runs: dict[str, dict[str, Any]], tiny_models: dict
) -> None:
    held_out = [name for name, entry in tiny_models.items() if entry["group"] == "held_out"]
    assert len(held_out) >= 14
    for name in held_out:
        run = runs[name]
        if run["rc"] == 0:
            assert run["result"]["ok"] and all(s["finite"] for s in run["result"]["outputs"].values()), name
        else:
            assert run["result"]["error_kind"] == "unsupported_model", (name, run["stderr"][-1500:])
            assert "\n" not in run["result"]["error"]
    # All of these run today; a regression to "diagnosed" must be a conscious change here.
    assert [n for n in held_out if runs[n]["rc"] != 0] == []


def test_unsupported_forward_is_a_clear_diagnosis(runs: dict[str, dict[str, Any]]) -> None:
    run = runs["time-series"]
    assert run["rc"] == 1 and run["result"]["ok"] is False
    assert run["result"]["error_kind"] == "unsupported_model"
    assert (
        "requires 'past_time_features'" in run["result"]["error"]
    )  # past_values is built (forecasters); time features are not
    assert _unprogressed(run["stderr"]) == [f"error: {run['result']['error']}"]


def test_runs_are_deterministic_and_dtype_is_honoured(runs: dict[str, dict[str, Any]]) -> None:
    assert _ok(runs["llama"])["outputs"] == _ok(runs["llama-again"])["outputs"]
    bf16 = _ok(runs["bf16"])
    assert bf16["dtype"] == "bfloat16" and bf16["outputs"]["logits"]["dtype"] == "bfloat16"


def test_config_from_an_hf_cache_layout_offline(runs: dict[str, dict[str, Any]]) -> None:
    result = _ok(runs["llama-hf-cache"])
    assert result["model_id"] == "tiny/llama-cache"
    assert "HF cache" in runs["llama-hf-cache"]["stdout"]


def test_dry_run_max_layers_keeps_one_layer_of_each_kind(runs: dict[str, dict[str, Any]]) -> None:
    # Gemma3 alternates sliding-window and full attention: a 1-layer cap still builds one of each.
    result = _ok(runs["gemma3-capped"])
    assert (result["layers_built"], result["layers_total"], result["depth_reduced"]) == (2, 6, True)
    # DeepSeek-V3: the first layer is dense, the rest MoE; the cap keeps one of each.
    result = _ok(runs["deepseek-capped"])
    assert (result["layers_built"], result["layers_total"]) == (2, 4)


def test_recurrent_state_is_not_an_output(runs: dict[str, dict[str, Any]]) -> None:
    outputs = _ok(runs["xlnet"])["outputs"]
    assert list(outputs) == ["logits"] and outputs["logits"]["shape"] == [2, 32, 128]  # no XLNet mems


@pytest.mark.parametrize(
    "name,kind,needle",
    [
        ("unknown-family", "unsupported_model", "unknown task family 'protein_folding'"),
        ("unknown-class", "unsupported_model", "no model class 'LlamaForTeleportation'"),
        ("no-class", "spec_error", "'model_class' is missing"),
        ("bad-dtype", "spec_error", "unknown floating dtype 'float12'"),
        ("not-json", "spec_error", "is not valid JSON"),
        ("missing-spec", "spec_error", "spec file not found"),
        ("bad-flag", "spec_error", "invalid choice: 'tpu'"),
    ],
)
def test_bad_input_is_one_line_without_traceback(
    name: str, kind: str, needle: str, runs: dict[str, dict[str, Any]]
) -> None:
    run = runs[name]
    assert run["rc"] == 1 and run["result"]["ok"] is False
    assert run["result"]["error_kind"] == kind and needle in run["result"]["error"]
    assert _unprogressed(run["stderr"]) == [f"error: {run['result']['error']}"]
    assert run["stdout"].strip().splitlines()[-1].startswith("ASCENDBRIDGE_RESULT ")


def test_failure_in_model_code_keeps_the_traceback_for_the_healer(runs: dict[str, dict[str, Any]]) -> None:
    run = runs["broken-model"]
    assert run["rc"] == 1 and run["result"]["ok"] is False and run["result"]["error_kind"] == "exception"
    assert "Traceback (most recent call last)" in run["stderr"]
    assert run["result"]["error"].startswith("RuntimeError: ") and "\n" not in run["result"]["error"]
    assert run["stderr"].strip().splitlines()[-1] == f"error: {run['result']['error']}"
    assert json.loads(run["stdout"].strip().splitlines()[-1].split(" ", 1)[1])["ok"] is False


# --- vision families (issue 13) ---
def test_a_vlm_runs_image_and_text_through_its_image_processor(runs: dict[str, dict[str, Any]]) -> None:
    qwen, gemma = runs["qwen2.5-vl"]["stdout"], runs["gemma3-vlm"]["stdout"]
    # Qwen2.5-VL: flattened patches (2 images x 8 x 8 patches, 3 x 2 x 4 x 4 values) and the grid metadata
    assert "image + text: qwen2_5_vl image processor" in qwen
    assert "pixel_values [128, 96], image_grid_thw [2, 3]" in qwen and "mm_token_type_ids [2, 50]" in qwen
    # Gemma 3: whole images, <start_of_image> + 4 soft tokens + <end_of_image> in the text, token types
    assert "pixel_values [2, 3, 32, 32]" in gemma and "token_type_ids [2, 38]" in gemma
    for name in ("qwen2.5-vl", "gemma3-vlm"):
        assert (
            len(runs[name]["result"]["generated_ids"][0]) == 4
            and "generated (greedy, 4 tokens)" in runs[name]["stdout"]
        )


def test_a_vlm_without_an_image_layout_runs_text_only_and_says_so(runs: dict[str, dict[str, Any]]) -> None:
    run = runs["llava-vlm"]
    assert _ok(run)["inputs"].endswith(
        "text-only fallback: no image layout for model_type 'llava' (known: gemma3, qwen2_5_vl, qwen2_vl)"
    )
    assert "pixel_values" not in run["stdout"] and "input_ids [2, 32], attention_mask [2, 32]" in run["stdout"]


def test_vision_summaries_read_as_task_results(runs: dict[str, dict[str, Any]]) -> None:
    def summary(name: str) -> str:
        return next(line for line in runs[name]["stdout"].splitlines() if line.startswith("result: "))

    assert "best text per image: image 0 -> text" in summary("siglip")
    assert summary("rt-detr").startswith("result: 10 queries, top detections of image 0: ")
    assert "score " in summary("rt-detr") and "box (cx, cy, w, h) [" in summary("rt-detr")
    assert any(f"({label})" in summary("rt-detr") for label in ("cat", "dog", "car"))
    assert "mask [8, 8] of image 0, " in summary("segformer") and "%" in summary("segformer")
    assert summary("depth-anything").startswith("result: depth map [28, 28] of image 0: range ")
    assert set(runs["yolos"]["result"]["outputs"]) == {"logits", "pred_boxes", "scores"}


# --- end vision families ---


def _unprogressed(stderr: str) -> list[str]:
    """stderr without its progress lines (ab_runtime/progress.py): what is left is the one-line error."""
    return [line for line in stderr.strip().splitlines() if not line.startswith("progress: ")]
