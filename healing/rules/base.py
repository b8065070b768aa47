"""The shape of one healing rule and of its answers.

A rule recognises one kind of failure (`match`) and proposes what to do about it (`remedy`):
change the spec (`Fix`, a set of path -> value edits, recorded verbatim in applied_fixes), stop
and wait for a human (`Block`: remote code, gated weights, missing hardware), or admit it has no
further fix (`GiveUp`), which lets the loop escalate or end as failed with the diagnosis.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from ascendbridge.package.spec import AdaptationSpec
from healing.failure import Failure


@dataclass(frozen=True)
class Match:
    """A rule's reading of a failure: one human line plus the facts it extracted."""

    summary: str
    facts: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Fix:
    description: str
    changes: dict[str, Any]  # "inputs/seq_len" -> 16, "dependencies/einops" -> ""


@dataclass(frozen=True)
class Block:
    reason: str


@dataclass(frozen=True)
class GiveUp:
    reason: str


Remedy = Fix | Block | GiveUp


@dataclass(frozen=True)
class FixContext:
    """What a remedy may consult besides the spec: the model's config and the board's policy."""

    model_config: dict[str, Any] = field(default_factory=dict)
    allow_remote_code: bool = False
    has_hf_token: bool = False

    def config_value(self, *names: str) -> Any | None:
        """The first of `names` present in the model config (or its text_config), else None."""
        sources = [self.model_config]
        if isinstance(self.model_config.get("text_config"), dict):
            sources.append(self.model_config["text_config"])
        for source in sources:
            for name in names:
                if source.get(name) is not None:
                    return source[name]
        return None


class Rule:
    """Base class: subclasses set `name` and `description`, implement match or set `pattern` and
    `found` for the common case (the first hit of `pattern` in the failure's text matches, described
    as `found (hit)`), and implement remedy or set `answer` where it is always the same."""

    name: str = ""
    description: str = ""
    pattern: re.Pattern[str] | None = None
    found: str = ""
    answer: Remedy | None = None

    def match(self, failure: Failure) -> Match | None:
        if self.pattern is None:
            raise NotImplementedError
        hit = self.pattern.search(failure.text)
        return Match(f"{self.found} ({hit.group(0)})") if hit else None

    def remedy(self, spec: AdaptationSpec, match: Match, ctx: FixContext) -> Remedy:
        if self.answer is None:
            raise NotImplementedError
        return self.answer


def layer_count(spec: AdaptationSpec, ctx: FixContext) -> int | None:
    """How many layers the model has, from the spec's dry-run limit or the config."""
    if spec.dry_run_max_layers:
        return spec.dry_run_max_layers
    value = ctx.config_value("num_hidden_layers", "n_layer", "num_layers", "encoder_layers")
    return int(value) if isinstance(value, int) else None


def shrink_workload(spec: AdaptationSpec, phase: str, ctx: FixContext, why: str) -> Remedy:
    """The shared ladder for memory and time: batch 1, then half the sequence, then (dry runs
    only, where fewer layers still run the real code path) half the depth."""
    inputs = spec.inputs
    if inputs.batch_size > 1:
        return Fix(f"{why}: batch size {inputs.batch_size} -> 1", {"inputs/batch_size": 1})
    if inputs.seq_len > 8:
        new = max(8, inputs.seq_len // 2)
        return Fix(f"{why}: sequence length {inputs.seq_len} -> {new}", {"inputs/seq_len": new})
    if phase == "dry_run":
        layers = layer_count(spec, ctx)
        if layers is None or layers > 1:
            new = max(1, (layers or 2) // 2)
            return Fix(f"{why}: dry run builds at most {new} layers", {"dry_run_max_layers": new})
    return GiveUp(
        f"{why} even with batch 1, sequence {inputs.seq_len}"
        + (" and 1 layer" if phase == "dry_run" else "")
        + "; the model does not fit this device"
    )
