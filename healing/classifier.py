"""Turn a failure into a diagnosis: the first rule of the catalogue that recognises it.

The diagnosis is the machine-readable record stored on the board and in the attempt log, so it
carries only redacted text (the Failure is built from redacted output) and short facts.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from healing.failure import Failure
from healing.rules import RULES, Match, Rule

UNCLASSIFIED = "unclassified"
_MAX_FACT_CHARS = 300


@dataclass(frozen=True)
class Classification:
    rule: Rule | None  # None: no rule recognised the failure
    match: Match | None
    failure: Failure

    @property
    def rule_name(self) -> str:
        return self.rule.name if self.rule else UNCLASSIFIED

    @property
    def summary(self) -> str:
        return self.match.summary if self.match else self.failure.error

    def diagnosis(self, **extra: Any) -> dict[str, Any]:
        """The board-ready record: rule, summary, phase, error line, log tail, short facts."""
        facts = {
            k: v
            for k, v in (self.match.facts if self.match else {}).items()
            if len(json.dumps(v, default=str)) <= _MAX_FACT_CHARS
        }
        record: dict[str, Any] = {
            "rule": self.rule_name,
            "summary": self.summary,
            "phase": self.failure.phase,
            "exit_code": self.failure.exit_code,
            "timed_out": self.failure.timed_out,
            "error": self.failure.error,
            "facts": facts,
            "log_tail": self.failure.tail(),
        }
        record.update(extra)
        return record


def classify(failure: Failure, rules: Sequence[Rule] = RULES) -> Classification:
    for rule in rules:
        match = rule.match(failure)
        if match is not None:
            return Classification(rule, match, failure)
    return Classification(None, None, failure)
