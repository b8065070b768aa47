"""The model reads a config attribute its config.json lacks: override it with a sane default."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from ascendbridge.package.spec import AdaptationSpec
from healing.failure import Failure
from healing.rules.base import Fix, FixContext, GiveUp, Match, Remedy, Rule

_MISSING = re.compile(r"'(\w*Config)' object has no attribute '(\w+)'")


def _heads(ctx: FixContext) -> Any:
    return ctx.config_value("num_attention_heads", "n_head")


def _head_dim(ctx: FixContext) -> Any:
    hidden, heads = ctx.config_value("hidden_size", "n_embd", "d_model"), _heads(ctx)
    return hidden // heads if isinstance(hidden, int) and isinstance(heads, int) and heads else None


def _intermediate(ctx: FixContext) -> Any:
    hidden = ctx.config_value("hidden_size", "n_embd", "d_model")
    return 4 * hidden if isinstance(hidden, int) else None


# Defaults the transformers config classes use for these names (or derived from the config).
SANE_DEFAULTS: dict[str, Any] = {
    "layer_norm_eps": 1e-12,
    "layer_norm_epsilon": 1e-5,
    "rms_norm_eps": 1e-6,
    "rope_theta": 10000.0,
    "rope_scaling": None,
    "hidden_act": "gelu",
    "hidden_dropout_prob": 0.0,
    "attention_probs_dropout_prob": 0.0,
    "attention_dropout": 0.0,
    "classifier_dropout": None,
    "initializer_range": 0.02,
    "max_position_embeddings": 512,
    "type_vocab_size": 2,
    "position_embedding_type": "absolute",
    "pad_token_id": 0,
    "use_cache": False,
    "is_decoder": False,
    "tie_word_embeddings": False,
    "attention_bias": False,
    "mlp_bias": False,
    "sliding_window": None,
    "pretraining_tp": 1,
    "chunk_size_feed_forward": 0,
}
DERIVED_DEFAULTS: dict[str, Callable[[FixContext], Any]] = {
    "num_key_value_heads": _heads,
    "head_dim": _head_dim,
    "intermediate_size": _intermediate,
}


class MissingConfigAttributeRule(Rule):
    name = "missing_config_attribute"
    description = "The model code reads a config attribute that is missing: set it via config_overrides."

    def match(self, failure: Failure) -> Match | None:
        found = _MISSING.search(failure.text)
        if not found:
            return None
        return Match(
            f"{found.group(1)} has no attribute '{found.group(2)}'",
            {"config_class": found.group(1), "attribute": found.group(2)},
        )

    def remedy(self, spec: AdaptationSpec, match: Match, ctx: FixContext) -> Remedy:
        attribute = match.facts["attribute"]
        if attribute in spec.config_overrides:
            return GiveUp(f"'{attribute}' is already overridden and still missing")
        if attribute in DERIVED_DEFAULTS:
            value = DERIVED_DEFAULTS[attribute](ctx)
            if value is None:
                return GiveUp(f"cannot derive '{attribute}' from the model config")
        elif attribute in SANE_DEFAULTS:
            value = SANE_DEFAULTS[attribute]
        else:
            return GiveUp(f"no sane default known for '{attribute}'; it must come from the model's config")
        return Fix(f"config override {attribute} = {value!r}", {f"config_overrides/{attribute}": value})


class UnsupportedModelRule(Rule):
    name = "unsupported_model"
    description = (
        "The runtime refuses the model (a forward signature or family it cannot drive, an unreadable "
        "spec): no spec edit of the catalogue helps, and a retry gives the same answer."
    )

    answer = GiveUp(
        "the runtime cannot drive this model as specified (a task family or input recipe for it "
        'is needed: docs/adaptation.md, "Families not supported yet")'
    )

    def match(self, failure: Failure) -> Match | None:
        kind = (failure.result or {}).get("error_kind")
        if kind in ("unsupported_model", "spec_error"):
            return Match(f"the runtime refuses the model: {failure.error}", {"error_kind": kind})
        return None
