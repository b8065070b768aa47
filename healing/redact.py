"""Secret redaction for everything the healer stores or prints (board diagnoses, logs).

Tracebacks can carry URLs with tokens or echoed environment values; secrets never land in the
board or logs (docs/agents.md, "Records, memory, redaction"), so every text that leaves a failed run goes through `redact` first.
"""

from __future__ import annotations

import os
import re
from typing import IO

_PATTERNS: tuple[re.Pattern[str], ...] = (
    re.compile(r"hf_[A-Za-z0-9]{20,}"),  # Hugging Face user access tokens
    re.compile(r"sk-[A-Za-z0-9_\-]{20,}"),  # OpenAI-style API keys
    re.compile(r"(?i)(authorization:\s*(?:bearer|token)\s+)\S+"),
    re.compile(r"(?i)((?:token|api[_-]?key|secret|password)=)[^\s&'\"]+"),
)
_SECRET_ENV_HINTS = ("TOKEN", "KEY", "SECRET", "PASSWORD")
_MASK = "[REDACTED]"


def _env_secrets() -> list[str]:
    """Values of secret-looking environment variables that are long enough to be meaningful."""
    return [
        value
        for name, value in os.environ.items()
        if any(h in name.upper() for h in _SECRET_ENV_HINTS) and len(value) >= 8
    ]


def redact(text: str) -> str:
    """Mask tokens, keys and secret env values in `text`."""
    for value in _env_secrets():
        text = text.replace(value, _MASK)
    for pattern in _PATTERNS:
        text = pattern.sub(lambda m: (m.group(1) if m.groups() else "") + _MASK, text)
    return text


class RedactingWriter:
    """A text stream wrapper that redacts each write: command output is streamed line by line
    into the attempt log, and the log must not carry secrets either."""

    def __init__(self, stream: IO[str]) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        return self._stream.write(redact(text))

    def flush(self) -> None:
        self._stream.flush()
