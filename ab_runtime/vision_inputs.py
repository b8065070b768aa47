"""Image + text inputs for vision-language models, laid out as the model's own processor does.

A VLM's forward needs more than random ids: pixel values from its image processor (with the
image grid / patch metadata some models need, e.g. Qwen2.5-VL's image_grid_thw), and exactly as
many image tokens in the text as the vision tower yields features, wrapped in the model's
begin/end markers. Seeded images go through the model's real image processor class, built from
the config's sizes (no Hub files are needed for a dry run); the tokens are placed by a per-model
layout that mirrors its transformers processor. A model with no layout here runs text-only, and
the run says so (`text-only fallback: <reason>`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from .errors import UnsupportedModel
from .inputs import InputContext, input_ids
from .spec import InputRecipe

TEXT_PREFIX = 4  # random text tokens before the image block (the chat template's role header)


@dataclass(frozen=True)
class ImageLayout:
    """How one model family turns an image into processor outputs and text tokens."""

    processor: Callable[[Any, int], Any]  # (config, image side) -> a transformers image processor
    image_side: Callable[[Any], int]  # config -> side length of the seeded square image
    block: Callable[[Any, dict[str, torch.Tensor], int], list[int]]  # (config, pixels, image index) -> ids
    token_types: str | None = None  # name of the per-token modality input the processor returns


def _qwen_processor(config: Any, side: int) -> Any:
    from transformers import Qwen2VLImageProcessor

    vision = config.vision_config
    return Qwen2VLImageProcessor(
        patch_size=vision.patch_size,
        merge_size=vision.spatial_merge_size,
        temporal_patch_size=vision.temporal_patch_size,
        min_pixels=side * side,
        max_pixels=side * side,
    )


def _qwen_side(config: Any) -> int:
    """The smallest image the processor keeps as is: 4 x 4 merged patches."""
    vision = config.vision_config
    return 4 * vision.patch_size * vision.spatial_merge_size


def _qwen_block(config: Any, pixels: dict[str, torch.Tensor], index: int) -> list[int]:
    """<|vision_start|> + grid.prod() / merge**2 x <|image_pad|> + <|vision_end|> (Qwen2_5_VLProcessor)."""
    count = int(pixels["image_grid_thw"][index].prod()) // config.vision_config.spatial_merge_size**2
    return [config.vision_start_token_id, *[config.image_token_id] * count, config.vision_end_token_id]


def _gemma3_processor(config: Any, side: int) -> Any:
    from transformers import Gemma3ImageProcessor

    return Gemma3ImageProcessor(size={"height": side, "width": side})


def _gemma3_block(config: Any, pixels: dict[str, torch.Tensor], index: int) -> list[int]:
    """<start_of_image> + mm_tokens_per_image x <image_soft_token> + <end_of_image> (Gemma3Processor)."""
    return [config.boi_token_index, *[config.image_token_index] * config.mm_tokens_per_image, config.eoi_token_index]


LAYOUTS: dict[str, ImageLayout] = {
    "qwen2_5_vl": ImageLayout(_qwen_processor, _qwen_side, _qwen_block, "mm_token_type_ids"),
    "qwen2_vl": ImageLayout(_qwen_processor, _qwen_side, _qwen_block, "mm_token_type_ids"),
    "gemma3": ImageLayout(
        _gemma3_processor, lambda c: int(c.vision_config.image_size), _gemma3_block, "token_type_ids"
    ),
}


def image_token_id(config: Any) -> int | None:
    value = getattr(config, "image_token_id", None)
    return value if value is not None else getattr(config, "image_token_index", None)


def layout_for(config: Any) -> tuple[ImageLayout | None, str]:
    """The model's layout, or None and the reason the run falls back to text only."""
    model_type = str(getattr(config, "model_type", ""))
    layout = LAYOUTS.get(model_type)
    if layout is None:
        return None, (
            f"text-only fallback: no image layout for model_type '{model_type}' (known: {', '.join(sorted(LAYOUTS))})"
        )
    return layout, f"image + text: {model_type} image processor, image tokens placed as its processor does"


def seeded_images(generator: torch.Generator, count: int, side: int) -> list[Any]:
    """`count` seeded RGB images (uint8 HWC numpy arrays, what PIL images become in a processor)."""
    return [
        torch.randint(0, 256, (side, side, 3), generator=generator, dtype=torch.uint8).numpy() for _ in range(count)
    ]


def image_text_inputs(ctx: InputContext, layout: ImageLayout, accepted: frozenset[str]) -> dict[str, torch.Tensor]:
    """One image per sample through the real image processor, its tokens inside random text."""
    config = ctx.config
    side = ctx.recipe.image_size or layout.image_side(config)
    try:
        processor = layout.processor(config, side)
    except (ImportError, AttributeError, TypeError, ValueError) as exc:
        raise UnsupportedModel(f"cannot build the image processor for {config.model_type}: {exc}") from None
    pixels = dict(processor(images=seeded_images(ctx.generator, ctx.batch, side), return_tensors="pt"))
    text = input_ids(ctx)
    rows = [
        text[i, :TEXT_PREFIX].tolist() + layout.block(config, pixels, i) + text[i, TEXT_PREFIX:].tolist()
        for i in range(ctx.batch)
    ]
    inputs = {k: v for k, v in image_text_batch(config, layout, pixels, rows).items() if k in accepted}
    if "pixel_values" in inputs:
        inputs["pixel_values"] = inputs["pixel_values"].to(ctx.float_dtype)
    return inputs


def image_text_batch(
    config: Any, layout: ImageLayout, pixels: dict[str, Any], rows: list[list[int]]
) -> dict[str, torch.Tensor]:
    """Token rows (image blocks already placed) and the image processor's tensors as one forward
    batch, with the per-token modality input the model's processor adds (seeded and real images)."""
    ids = torch.tensor(rows, dtype=torch.long)
    inputs = {"input_ids": ids, "attention_mask": torch.ones_like(ids)}
    if layout.token_types:
        inputs[layout.token_types] = (ids == image_token_id(config)).long()
    inputs.update({k: v for k, v in pixels.items() if isinstance(v, torch.Tensor)})
    return inputs


def vlm_inputs(
    model: torch.nn.Module, config: Any, recipe: InputRecipe, float_dtype: torch.dtype, accepted: frozenset[str]
) -> dict[str, torch.Tensor] | None:
    """Image + text inputs, or None when the model has no layout (the caller runs text only)."""
    layout, _ = layout_for(config)
    if layout is None:
        return None
    ctx = InputContext(config, recipe, torch.Generator().manual_seed(recipe.seed), float_dtype)
    return image_text_inputs(ctx, layout, accepted)
