"""Low-rank adapters (LoRA) through peft (`LoraConfig` + `get_peft_model`): the base weights are
frozen, only the adapters train. The target modules are the config's `lora_targets`, else peft's
own choice for the architecture (q_proj / v_proj for Llama, query / value for BERT, c_attn for
GPT-2, q / v for T5), else every linear layer but the output head (peft's "all-linear")."""

from __future__ import annotations

from typing import Any

from torch import nn

from ..errors import SpecError

ADAPTER_MARK = "lora_"  # in the name of every adapter parameter peft adds (lora_A, lora_B)


def lora_targets(model_type: str, asked: tuple[str, ...]) -> tuple[list[str] | str, str]:
    """(peft's target_modules, why): the asked names, peft's mapping for `model_type`, or all-linear."""
    from peft.utils import TRANSFORMERS_MODELS_TO_LORA_TARGET_MODULES_MAPPING as MAPPING

    if asked:
        return list(asked), "lora_targets in the training config"
    if model_type in MAPPING:
        return list(MAPPING[model_type]), f"peft's default for model type {model_type!r}"
    return "all-linear", f"peft has no default for model type {model_type!r}: every linear layer but the output head"


def apply_lora(
    model: nn.Module, rank: int, alpha: float, asked: tuple[str, ...] = ()
) -> tuple[nn.Module, list[str], str]:
    """(the peft model, the adapted module names, why those), everything but the adapters frozen.
    A missing peft or targets that match nothing are a SpecError naming the cause."""
    try:
        from peft import LoraConfig, get_peft_model
    except ImportError:
        raise SpecError("LoRA training needs peft, which this environment lacks (pip install 'peft>=0.18')") from None
    targets, why = lora_targets(str(getattr(getattr(model, "config", None), "model_type", "")), asked)
    try:
        peft_model: Any = get_peft_model(
            model, LoraConfig(r=rank, lora_alpha=alpha, lora_dropout=0.0, target_modules=targets)
        )
    except ValueError as exc:
        raise SpecError(f"LoRA: {str(exc).splitlines()[0]}") from None
    return peft_model, sorted(peft_model.targeted_module_names), why
