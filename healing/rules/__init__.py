"""The healing rule catalogue: an ordered registry of small, named rules.

Order matters where messages overlap: hardware and access problems first (no spec edit helps),
then packaging, resources, API versions, and finally input and config issues whose patterns are
the most generic. `RULES` is the catalogue the classifier walks; `rule_named` finds one by name.
"""

from __future__ import annotations

from ascendbridge.package.spec import apply_changes
from healing.rules.access import GatedRepoRule, RemoteCodeRule, WeightsUnreachableRule
from healing.rules.base import Block, Fix, FixContext, GiveUp, Match, Remedy, Rule
from healing.rules.config import MissingConfigAttributeRule, UnsupportedModelRule
from healing.rules.dependencies import DependencyResolutionRule, MissingModuleRule
from healing.rules.devices import DeviceMismatchRule, DeviceUnavailableRule
from healing.rules.inputs import PadTokenRule, SequenceTooLongRule
from healing.rules.memory import OutOfMemoryRule, TimeoutRule
from healing.rules.numerics import DtypeUnsupportedRule, NonFiniteOutputsRule
from healing.rules.transformers_compat import TransformersVersionRule

RULES: tuple[Rule, ...] = (
    DeviceUnavailableRule(),
    RemoteCodeRule(),
    GatedRepoRule(),
    WeightsUnreachableRule(),
    DependencyResolutionRule(),
    TimeoutRule(),
    OutOfMemoryRule(),
    MissingModuleRule(),
    TransformersVersionRule(),
    PadTokenRule(),
    DtypeUnsupportedRule(),
    NonFiniteOutputsRule(),
    DeviceMismatchRule(),
    MissingConfigAttributeRule(),
    SequenceTooLongRule(),
    UnsupportedModelRule(),
)


def rule_named(name: str) -> Rule:
    for rule in RULES:
        if rule.name == name:
            return rule
    raise KeyError(f"unknown healing rule '{name}'")


__all__ = ["RULES", "rule_named", "Rule", "Match", "Fix", "Block", "GiveUp", "Remedy", "FixContext", "apply_changes"]
