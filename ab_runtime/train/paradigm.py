"""The training objective from the model's config: causal LM, masked LM or seq2seq.

Each paradigm builds a batch (inputs and labels) from packed blocks and names the Auto class the
model is built with; any other architecture is refused with the reason, before anything runs.
The loss is computed here from the logits as a token sum, so that a global batch split over
ranks gives the same loss and gradients as one process (harness.py divides by the global count).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F

from ..errors import UnsupportedModel

IGNORE = -100
MASK_FRACTION = 0.15  # BERT: 15 % of tokens are predicted; of those 80 % [MASK], 10 % random, 10 % kept


@dataclass(frozen=True)
class Paradigm:
    name: str  # causal_lm | masked_lm | seq2seq
    auto_class: str  # transformers Auto class the model is built with


PARADIGMS = {
    "causal_lm": Paradigm("causal_lm", "AutoModelForCausalLM"),
    "masked_lm": Paradigm("masked_lm", "AutoModelForMaskedLM"),
    "seq2seq": Paradigm("seq2seq", "AutoModelForSeq2SeqLM"),
}
SUFFIXES = (
    ("ForCausalLM", "causal_lm"),
    ("LMHeadModel", "causal_lm"),
    ("ForMaskedLM", "masked_lm"),
    ("ForConditionalGeneration", "seq2seq"),
)


def paradigm_of(config: Any) -> Paradigm:
    """The paradigm the config's architecture trains with, or UnsupportedModel with the reason."""
    architectures = list(getattr(config, "architectures", None) or [])
    for arch in architectures:
        for suffix, name in SUFFIXES:
            if arch.endswith(suffix):
                if name == "seq2seq" and not getattr(config, "is_encoder_decoder", False):
                    break
                return PARADIGMS[name]
    raise UnsupportedModel(
        f"training supports causal LM, masked LM and text seq2seq; architecture {architectures or '[none]'} "
        f"(model_type {getattr(config, 'model_type', '?')!r}) is none of them"
    )


def mask_block(
    ids: torch.Tensor, seed: int, vocab_size: int, mask_id: int, special: Sequence[int]
) -> tuple[torch.Tensor, torch.Tensor]:
    """BERT masking of one block with its own generator (seeded by the block, so the masks do not
    depend on how a batch is split over ranks): (inputs, labels with IGNORE where not predicted)."""
    generator = torch.Generator().manual_seed(seed)
    chosen = torch.rand(ids.shape, generator=generator) < MASK_FRACTION
    for token in special:
        chosen &= ids != token
    labels = torch.where(chosen, ids, torch.full_like(ids, IGNORE))
    roll = torch.rand(ids.shape, generator=generator)
    random_ids = torch.randint(0, vocab_size, ids.shape, generator=generator)
    inputs = torch.where(chosen & (roll < 0.8), torch.full_like(ids, mask_id), ids)
    inputs = torch.where(chosen & (roll >= 0.8) & (roll < 0.9), random_ids, inputs)
    return inputs, labels


def make_batch(
    paradigm: Paradigm,
    blocks: Sequence[Any],
    keys: Sequence[int],
    seed: int,
    vocab_size: int,
    mask_id: int,
    pad_id: int,
    special: Sequence[int],
) -> tuple[dict[str, torch.Tensor], torch.Tensor]:
    """(model inputs, labels) for the blocks; `keys` are the blocks' global indices (the masking seeds)."""
    if paradigm.name == "seq2seq":
        source = torch.tensor([block[0] for block in blocks], dtype=torch.long)
        target = torch.tensor([block[1] for block in blocks], dtype=torch.long)
        labels = torch.where(target == pad_id, torch.full_like(target, IGNORE), target)
        return {"input_ids": source, "attention_mask": (source != pad_id).long(), "labels": labels}, labels
    ids = torch.tensor([list(block) for block in blocks], dtype=torch.long)
    if paradigm.name == "causal_lm":
        return {"input_ids": ids}, ids
    pairs = [
        mask_block(row, seed * 1_000_003 + key, vocab_size, mask_id, special)
        for row, key in zip(ids, keys, strict=True)
    ]
    inputs = torch.stack([p[0] for p in pairs])
    labels = torch.stack([p[1] for p in pairs])
    return {"input_ids": inputs, "attention_mask": torch.ones_like(inputs)}, labels


def token_loss_sum(paradigm: Paradigm, logits: torch.Tensor, labels: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(sum of the token losses in float32, number of predicted tokens); causal LM predicts the next token."""
    if paradigm.name == "causal_lm":
        logits = logits[:, :-1]
    logits = logits.float().reshape(-1, logits.shape[-1])
    labels = predicted_labels(paradigm, labels).reshape(-1).to(logits.device)
    loss = F.cross_entropy(logits, labels, ignore_index=IGNORE, reduction="sum")
    return loss, (labels != IGNORE).sum()


def predicted_labels(paradigm: Paradigm, labels: torch.Tensor) -> torch.Tensor:
    """The labels the loss predicts (causal LM: from the second token on); counting the tokens that
    are not IGNORE before any forward gives the global divisor of an accumulated step."""
    return labels[:, 1:] if paradigm.name == "causal_lm" else labels


def correct_predictions(logits: torch.Tensor, labels: torch.Tensor) -> int:
    """Predicted tokens whose argmax is right (the masked-LM accuracy's numerator)."""
    labels = labels.to(logits.device)
    chosen = labels != IGNORE
    return int((logits.argmax(-1)[chosen] == labels[chosen]).sum())
