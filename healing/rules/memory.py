"""The run needs more memory or time than it has: shrink the workload step by step."""

from __future__ import annotations

from ascendbridge.package.spec import AdaptationSpec
from ascendbridge.workers.oom import OUT_OF_MEMORY_TEXT, SIGKILL_EXITS
from healing.failure import Failure
from healing.rules.base import FixContext, Match, Remedy, Rule, shrink_workload


class OutOfMemoryRule(Rule):
    name = "out_of_memory"
    description = "Out of memory (host, CUDA or NPU): smaller batch, then shorter sequence, then fewer dry-run layers."

    def match(self, failure: Failure) -> Match | None:
        found = OUT_OF_MEMORY_TEXT.search(failure.text)
        if (failure.result or {}).get("error_kind") == "dry_run_too_large":
            return Match(f"the dry run does not fit memory: {failure.error}", {"phase": failure.phase})
        if found:
            return Match(f"out of memory ({found.group(0)})", {"phase": failure.phase})
        if failure.exit_code in SIGKILL_EXITS and not failure.timed_out:
            return Match("killed by SIGKILL without a timeout (the kernel's OOM killer?)", {"phase": failure.phase})
        return None

    def remedy(self, spec: AdaptationSpec, match: Match, ctx: FixContext) -> Remedy:
        return shrink_workload(spec, match.facts.get("phase", ""), ctx, "out of memory")


class TimeoutRule(Rule):
    name = "timeout"
    description = "The run hung or was too slow and was killed at its timeout: run a smaller workload."

    def match(self, failure: Failure) -> Match | None:
        if failure.timed_out:
            return Match(f"killed after the {failure.timeout_s or 0:.0f} s timeout", {"phase": failure.phase})
        return None

    def remedy(self, spec: AdaptationSpec, match: Match, ctx: FixContext) -> Remedy:
        return shrink_workload(spec, match.facts.get("phase", ""), ctx, "timed out")
