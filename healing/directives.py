"""Directives from the team lead: a later stage's finding that only a spec change can act on (the
benchmark's operator that refuses a dtype). The healer applies the named rule's fix to the spec and
re-renders before its usual attempts, so the fix goes through healing and its gate like any other."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

from ascendbridge.package.spec import AdaptationSpec, AppliedFix, apply_changes
from healing.failure import Failure
from healing.rules import Fix, FixContext, rule_named
from healing.steps import rerender


def apply_directives(
    directory: Path,
    directives: list[dict[str, Any]],
    ctx: FixContext,
    say: Callable[[str], None],
    log: IO[str] | None = None,
) -> tuple[list[str], str | None]:
    """Apply each directive's fix to the package in `directory`: (fixes applied, the error that
    stopped it or None). A directive whose rule proposes no fix is reported, never half-applied."""
    spec = AdaptationSpec.load(directory)
    applied: list[str] = []
    for directive in directives:
        try:
            rule = rule_named(str(directive.get("rule")))
        except KeyError as exc:
            return applied, f"directive from {directive.get('from_stage')}: {exc.args[0]}"
        failure = Failure(
            phase="benchmark",
            exit_code=None,
            timed_out=False,
            output="",
            result={"finding": directive.get("finding") or {}},
        )
        match = rule.match(failure)
        remedy = rule.remedy(spec, match, ctx) if match else None
        if not isinstance(remedy, Fix):
            return applied, f"directive {rule.name} ({directive.get('summary')}): the rule proposes no fix"
        fixed = apply_changes(spec, remedy.changes)
        spec = fixed.model_copy(
            update={
                "applied_fixes": [
                    *fixed.applied_fixes,
                    AppliedFix(rule=rule.name, description=remedy.description, changes=remedy.changes),
                ]
            }
        )
        applied.append(remedy.description)
        say(f"directive from {directive.get('from_stage')}: {remedy.description}")
    if applied:
        spec.save(directory)
        broken = rerender(spec, directory, log)
        if broken is not None:
            return applied, f"re-rendering with the directive's fix failed: {broken.error}"
    return applied, None
