"""The generated inputs do not suit the model: too long for its positions, or padding undefined."""

from __future__ import annotations

import re

from ascendbridge.package.spec import AdaptationSpec
from healing.failure import Failure
from healing.rules.base import Fix, FixContext, GiveUp, Match, Remedy, Rule

_POSITION_NAMES = (
    "max_position_embeddings",
    "n_positions",
    "n_ctx",
    "max_seq_len",
    "seq_length",
    "max_sequence_length",
    "max_source_positions",
)
_INDEX = re.compile(r"index out of range in self")
_EXPANDED = re.compile(r"The expanded size of the tensor \((\d+)\) must match the existing size \((\d+)\)")
_SIZE = re.compile(r"The size of tensor a \((\d+)\) must match the size of tensor b \((\d+)\)")
_TOO_LONG = re.compile(
    r"sequence length is longer than the specified maximum|exceeds the maximum (?:sequence|position)"
)
_PAD = re.compile(
    r"Cannot handle batch sizes > 1 if no padding token is defined|"
    r"does not have a padding token|Asking to pad but the tokenizer does not have a padding token|"
    r"pad_token_id (?:is|must be) (?:not set|None|defined)"
)


class SequenceTooLongRule(Rule):
    name = "sequence_too_long"
    description = "The input sequence is longer than the model's positions: shorten inputs.seq_len."

    def match(self, failure: Failure) -> Match | None:
        text = failure.text
        for pattern in (_EXPANDED, _SIZE):
            found = pattern.search(text)
            if found and int(found.group(1)) > int(found.group(2)):
                return Match(
                    f"sequence of {found.group(1)} tokens does not fit {found.group(2)} positions",
                    {"limit": int(found.group(2))},
                )
        if _INDEX.search(text) or _TOO_LONG.search(text):
            return Match("an index ran past an embedding table (sequence longer than the positions?)", {"limit": None})
        return None

    def remedy(self, spec: AdaptationSpec, match: Match, ctx: FixContext) -> Remedy:
        seq = spec.inputs.seq_len
        limit = match.facts.get("limit") or ctx.config_value(*_POSITION_NAMES)
        if isinstance(limit, int):
            if seq <= limit - 2:
                return GiveUp(f"inputs.seq_len {seq} already fits the model's {limit} positions")
            new = max(1, min(seq // 2, limit - 2))  # -2: RoBERTa-style position offsets
            return Fix(f"shorten inputs.seq_len {seq} -> {new} (model has {limit} positions)", {"inputs/seq_len": new})
        if seq <= 8:
            return GiveUp(f"inputs.seq_len is already {seq}")
        return Fix(f"shorten inputs.seq_len {seq} -> {seq // 2} (position limit unknown)", {"inputs/seq_len": seq // 2})


class PadTokenRule(Rule):
    name = "pad_token"
    description = "The model needs a padding token for batched inputs: set pad_token_id (eos, else 0)."

    pattern = _PAD
    found = "no padding token defined"

    def remedy(self, spec: AdaptationSpec, match: Match, ctx: FixContext) -> Remedy:
        if "pad_token_id" in spec.config_overrides:
            if spec.inputs.batch_size > 1:
                return Fix("a pad token is set and still rejected: batch size -> 1", {"inputs/batch_size": 1})
            return GiveUp("pad_token_id is already set and the batch is 1")
        eos = ctx.config_value("eos_token_id")
        if isinstance(eos, list):
            eos = eos[0] if eos else None
        pad = eos if isinstance(eos, int) else 0
        origin = "the eos token" if isinstance(eos, int) else "token 0 (no eos token in the config)"
        return Fix(f"set config pad_token_id = {pad} ({origin})", {"config_overrides/pad_token_id": pad})
