"""Task results and readable summaries of the vision families (detection, segmentation, depth,
image-text similarity, VLMs).

A person checks boxes with scores, mask classes, a depth range or which text matches which
image, not raw tensors: `derive_*` computes those results from the forward's outputs (they are
compared by the benchmark like any output) and `*_summary` turns them into one line.
"""

from __future__ import annotations

from typing import Any

import torch

from .spec import InputRecipe
from .vision_inputs import layout_for, vlm_inputs

SHOWN = 3  # detections / mask classes a summary lists


def _label(config: Any, index: int) -> str:
    labels = getattr(config, "id2label", None) or {}
    return f"{index} ({labels.get(index, labels.get(str(index), '?'))})"


def detection_scores(logits: torch.Tensor, config: Any) -> tuple[torch.Tensor, torch.Tensor]:
    """(score, class) per query, as the model's image processor post-processes: sigmoid over the
    classes for focal-loss heads (RT-DETR), else softmax with the trailing no-object class dropped
    (DETR, YOLOS)."""
    probs = logits.float()
    if getattr(config, "use_focal_loss", False):
        probs = probs.sigmoid()
    else:
        probs = probs.softmax(-1)[..., :-1]
    return probs.max(-1)


def derive_detections(named: dict[str, torch.Tensor], config: Any) -> dict[str, torch.Tensor]:
    scores, _ = detection_scores(named["logits"], config)
    return {"scores": scores.to(named["logits"].dtype)}


def detection_summary(outputs: dict[str, torch.Tensor], config: Any) -> str:
    scores, classes = detection_scores(outputs["logits"][0], config)
    boxes = outputs["pred_boxes"][0].float()
    best = scores.topk(min(SHOWN, scores.numel())).indices.tolist()
    shown = "; ".join(
        f"{_label(config, int(classes[q]))} score {float(scores[q]):.3f} box (cx, cy, w, h) "
        f"[{', '.join(f'{v:.3f}' for v in boxes[q].tolist())}]"
        for q in best
    )
    return f"{len(scores)} queries, top detections of image 0: {shown}"


def derive_mask(named: dict[str, torch.Tensor], config: Any) -> dict[str, torch.Tensor]:
    """The predicted class per pixel (at the logits' resolution): what a segmentation user sees."""
    return {"mask": named["logits"].argmax(1)}


def segmentation_summary(outputs: dict[str, torch.Tensor], config: Any) -> str:
    mask = outputs["mask"][0] if "mask" in outputs else outputs["logits"][0].argmax(0)
    classes, counts = mask.flatten().unique(return_counts=True)
    order = counts.argsort(descending=True)[:SHOWN].tolist()
    shares = ", ".join(
        f"{_label(config, int(classes[i]))} {100.0 * float(counts[i]) / mask.numel():.0f}%" for i in order
    )
    return f"mask {list(mask.shape)} of image 0, {len(classes)} classes present: {shares}"


def depth_summary(outputs: dict[str, torch.Tensor], config: Any) -> str:
    depth = outputs["predicted_depth"][0].float()
    return (
        f"depth map {list(depth.shape)} of image 0: range {float(depth.min()):.4f} .. {float(depth.max()):.4f}, "
        f"mean {float(depth.mean()):.4f}"
    )


def similarity_summary(outputs: dict[str, torch.Tensor], config: Any) -> str:
    """logits_per_image[i, j]: how well text j matches image i (zero-shot labels are the texts)."""
    sims = outputs["logits_per_image"].float()
    best = sims.argmax(-1).tolist()
    pairs = ", ".join(f"image {i} -> text {j} ({float(sims[i, j]):.3f})" for i, j in enumerate(best[:SHOWN]))
    return f"image-text similarity {list(sims.shape)}: best text per image: {pairs}"


def sigmoid_scores(config: Any) -> bool:
    """SigLIP scores each image-text pair on its own (sigmoid); CLIP-style models share a softmax."""
    return str(getattr(config, "model_type", "")).startswith("siglip")


def label_probabilities(logits_per_image: torch.Tensor, config: Any) -> torch.Tensor:
    """One image's probability per candidate text, as transformers' zero-shot pipeline scores it:
    a sigmoid per pair for SigLIP, a softmax over the texts for CLIP-style models."""
    logits = logits_per_image.float()
    return logits.sigmoid() if sigmoid_scores(config) else logits.softmax(-1)


def next_token_summary(outputs: dict[str, torch.Tensor], config: Any) -> str:
    logits = outputs["logits"]
    ids = logits[0, -1].float().topk(min(5, logits.shape[-1])).indices.tolist()
    return f"next-token ids after the image and text (top 5): {ids}"


def vlm_input_builder(
    model: torch.nn.Module, config: Any, recipe: InputRecipe, float_dtype: torch.dtype, accepted: frozenset[str]
) -> dict[str, torch.Tensor] | None:
    return vlm_inputs(model, config, recipe, float_dtype, accepted)


def vlm_input_note(config: Any) -> str:
    return layout_for(config)[1]


def generate_ids(model: torch.nn.Module, inputs: dict[str, torch.Tensor], new_tokens: int) -> torch.Tensor | None:
    """Greedy continuation (no sampling, so it is reproducible); None when the model cannot generate."""
    if not hasattr(model, "generate") or "input_ids" not in inputs:
        return None
    out = model.generate(**inputs, max_new_tokens=new_tokens, min_new_tokens=new_tokens, do_sample=False)
    return out[:, inputs["input_ids"].shape[1] :]
