"""The one gate-report type: what every gate returns, prints for people and writes as `--json`.

A gate's own checks decide `passed` and phrase `summary` (one line, the first problem first); the
kit gives every report the same JSON rendering (`as_dict`), the same text for people (each
evidence set with its problems and notes, then `PASS: ` / `FAIL: ` and the summary) and the same
exit code (0 passed, 1 failed, 3 inconclusive). A stage's report adds its own fields by subclassing GateReport; a
gate that checks evidence sets lists one EvidenceCheck per set.
"""

from __future__ import annotations

from dataclasses import asdict, field
from typing import Any, ClassVar

from pydantic.dataclasses import dataclass

EXIT_PASSED = 0
EXIT_FAILED = 1
# The gate could not decide (its own re-measurement too noisy to judge a timing claim): never a
# failure; the team lead re-runs only the gate later, without spending an attempt.
EXIT_INCONCLUSIVE = 3


@dataclass
class EvidenceCheck:
    """One evidence set (a metrics file and what it names), checked: consistent means every
    recorded figure was re-derived; `verdict` is the recorded verdict once it is verified."""

    metrics_file: str
    consistent: bool
    verdict: str | None
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    label: str | None = None  # a people-facing name of the set (default: its file)


@dataclass
class GateReport:
    """A gate's answer. Subclasses add the stage's fields (they appear in `--json` as they are)."""

    adaptation: str
    passed: bool
    summary: str
    # Set (with passed False) when nothing failed but a timing check could not decide on this host
    # now: the verdict is `inconclusive`, not `failed`.
    inconclusive: bool = field(default=False, kw_only=True)
    # Where a gate that re-times did it (cores, threads), as the stage's run had them
    # (ascendbridge.gatekit.placement); printed first.
    placement: str = field(default="", kw_only=True)

    verdict_word: ClassVar[str] = "verdict"  # what an evidence set's verdict is called in the text

    def checks(self) -> list[EvidenceCheck]:
        """The evidence sets this report lists (none by default)."""
        return []

    def problem_lines(self) -> list[str]:
        """Problems found outside any evidence set (none by default)."""
        return []

    @property
    def verdict(self) -> str:
        """passed, failed or inconclusive."""
        return "passed" if self.passed else "inconclusive" if self.inconclusive else "failed"

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    def text(self) -> str:
        """The report for people: each set with its problems and notes, then PASS/FAIL: summary."""
        checks = self.checks()
        width = max((len(c.label or c.metrics_file) for c in checks), default=0)
        lines = []
        for c in checks:
            lines.append(
                f"{c.label or c.metrics_file:{width}s} evidence {'ok' if c.consistent else 'FAILED':6s} "
                f"{self.verdict_word} {c.verdict or '-'}"
            )
            lines += [f"    - {problem}" for problem in c.problems] + [f"    ({note})" for note in c.notes]
        lines += [f"  - {problem}" for problem in self.problem_lines()]
        word = {"passed": "PASS: ", "failed": "FAIL: ", "inconclusive": "INCONCLUSIVE: "}[self.verdict]
        return "\n".join([*([f"placement: {self.placement}"] if self.placement else []), *lines, word + self.summary])

    def exit_code(self) -> int:
        return {"passed": EXIT_PASSED, "failed": EXIT_FAILED, "inconclusive": EXIT_INCONCLUSIVE}[self.verdict]


def untrusted_summary(problems: list[str]) -> str:
    """The summary of a gate that stops at the code check (ascendbridge.gatekit.integrity)."""
    more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
    return f"code not as generated: {problems[0]}{more}"
