"""Failures a spec edit cannot fix alone: remote code, gated weights, an unreachable hub.

They end as `blocked` with the reason a human needs (allow remote code on the board, provide a
token, provide a local copy), except remote code once the board's policy allows it.
"""

from __future__ import annotations

import re

from ascendbridge.package.spec import AdaptationSpec
from healing.failure import Failure
from healing.rules.base import Block, Fix, FixContext, GiveUp, Match, Remedy, Rule

_REMOTE = re.compile(
    r"contains custom code which must be executed|trust_remote_code=True|"
    r"requires you to execute the (?:configuration|modeling|tokenizer) file"
)
_GATED = re.compile(
    r"GatedRepoError|Cannot access gated repo|trying to access a gated repo|"
    r"Access to model \S+ is restricted|40[13] Client Error|403 Forbidden|401 Unauthorized"
)
_UNREACHABLE = re.compile(
    r"LocalEntryNotFoundError|We couldn't connect to|couldn't connect to '?https?://|"
    r"offline mode is enabled|Cannot find the requested files in the (?:local|disk) cache|"
    r"Max retries exceeded with url|Name or service not known|Temporary failure in name resolution|"
    r"Network is unreachable|ConnectError|Connection refused"
)


class RemoteCodeRule(Rule):
    name = "remote_code"
    description = "The model ships its own Python code; it runs only when the board allows remote code."

    def match(self, failure: Failure) -> Match | None:
        if _REMOTE.search(failure.text):
            return Match("the model needs trust_remote_code (custom code in the repository)")
        return None

    def remedy(self, spec: AdaptationSpec, match: Match, ctx: FixContext) -> Remedy:
        if spec.trust_remote_code:
            return GiveUp("trust_remote_code is already on and the custom code still fails to load")
        if ctx.allow_remote_code:
            return Fix(
                "the board allows remote code for this model: trust_remote_code = true", {"trust_remote_code": True}
            )
        return Block("the model needs remote code; allow it for this model on the board to continue")


class GatedRepoRule(Rule):
    name = "gated_repo"
    description = "401/403 or a gated repository: access needs an authorised HF token."

    pattern = _GATED
    found = "access denied by the hub"

    def remedy(self, spec: AdaptationSpec, match: Match, ctx: FixContext) -> Remedy:
        if ctx.has_hf_token:
            return Block("gated model: the configured HF token has no access; request access on the hub")
        return Block("gated model: set HF_TOKEN to a token with access to this repository")


class WeightsUnreachableRule(Rule):
    name = "weights_unreachable"
    description = "Config or weights could not be fetched (offline, no network, not in the cache)."

    pattern = _UNREACHABLE
    found = "model files unreachable"
    answer = Block(
        "the model files cannot be fetched from here (offline or the hub is unreachable); "
        "provide a local copy or an HF cache, or set HF_ENDPOINT to a reachable mirror"
    )
