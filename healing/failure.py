"""What a failed step looks like to the rules: the phase, how the process ended, its (redacted)
output and the parsed RESULT line. Rules read only this, so they can be tested on captured
output from real failing runs without re-running anything.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Literal

from ascendbridge.package.uv_env import parse_result
from ascendbridge.workers.process import CommandResult
from healing.redact import redact

Phase = Literal["render", "lock", "sync", "dry_run", "real_run", "benchmark"]
TAIL_LINES = 40
_EXCEPTION_LINE = re.compile(r"^([A-Za-z_][\w.]*(?:Error|Exception|Interrupt|Exit)):?\s?(.*)$")


@dataclass(frozen=True)
class Failure:
    phase: Phase
    exit_code: int | None
    timed_out: bool
    output: str  # combined stdout + stderr, already redacted
    result: dict[str, Any] | None = None  # the ASCENDBRIDGE_RESULT object, if printed
    timeout_s: float | None = None

    @classmethod
    def from_command(cls, phase: Phase, command: CommandResult, timeout_s: float | None = None) -> Failure:
        output = redact(command.output)
        return cls(
            phase=phase,
            exit_code=command.exit_code,
            timed_out=command.timed_out,
            output=output,
            result=parse_result(output),
            timeout_s=timeout_s,
        )

    @property
    def error(self) -> str:
        """One line: the RESULT's error, else the last exception line, else the last output line."""
        if self.result and self.result.get("error"):
            return str(self.result["error"]).splitlines()[0][:500]
        for line in reversed(self.output.splitlines()):
            if _EXCEPTION_LINE.match(line.strip()):
                return line.strip()[:500]
        if self.timed_out:
            return f"timed out after {self.timeout_s or 0:.0f} s"
        lines = [x for x in self.output.splitlines() if x.strip()]
        return lines[-1].strip()[:500] if lines else f"exit code {self.exit_code}"

    @property
    def text(self) -> str:
        """Everything a rule may search: the output plus the RESULT error."""
        extra = str(self.result.get("error") or "") if self.result else ""
        return f"{self.output}\n{extra}"

    def tail(self, lines: int = TAIL_LINES) -> str:
        return "\n".join(self.output.splitlines()[-lines:])
