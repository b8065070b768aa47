"""The one interface every agent backend implements, and the registry that names them.

A backend gets a rendered (already redacted) prompt, the role's contract and a workspace
directory (a copy of the adaptation); it may edit files there and returns what happened. It
never decides whether the work is good: the sandbox and the stage's checker do.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

# The agent process never needs Hugging Face credentials: they stay out of its environment.
_HIDDEN_ENV = ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HUGGINGFACE_TOKEN")


@dataclass(frozen=True)
class BackendRequest:
    role: str
    prompt: str
    role_contract: str  # the body of .claude/agents/<role>.md
    workspace: Path  # the copy of the adaptation directory the agent may edit
    timeout_s: float


@dataclass
class BackendReply:
    exit_code: int | None
    timed_out: bool
    output: str  # what the backend printed or answered (redacted before it is stored)
    tokens: int | None = None  # input + output tokens, when the backend reports them
    refused_paths: list[str] = field(default_factory=list)  # writes the backend itself refused
    error: str = ""

    @property
    def ok(self) -> bool:
        return not self.timed_out and self.exit_code == 0 and not self.error


class Backend(Protocol):
    name: str

    def run(self, request: BackendRequest) -> BackendReply: ...


def agent_environment() -> dict[str, str]:
    """The environment an agent CLI runs with: ours, minus credentials it has no use for."""
    return {k: v for k, v in os.environ.items() if k not in _HIDDEN_ENV}


def reported_tokens(output: str) -> int | None:
    """Sum input+output tokens from every JSON object (or JSON line) carrying a `usage` block:
    Claude Code's `--output-format json` result and Codex's `--json` events both do."""
    total: int | None = None
    candidates = [output] + output.splitlines()
    seen: set[str] = set()
    for text in candidates:
        text = text.strip()
        if not text.startswith("{") or text in seen:
            continue
        seen.add(text)
        try:
            value = json.loads(text)
        except json.JSONDecodeError:
            continue
        usage = value.get("usage") if isinstance(value, dict) else None
        if isinstance(usage, dict):
            count = sum(
                int(usage.get(k) or 0) for k in ("input_tokens", "output_tokens", "prompt_tokens", "completion_tokens")
            )
            total = (total or 0) + count
    return total


BackendFactory = Callable[[], Backend]
_REGISTRY: dict[str, BackendFactory] = {}


def register_backend(name: str, factory: BackendFactory) -> None:
    _REGISTRY[name] = factory


def make_backend(name: str) -> Backend:
    if name not in _REGISTRY:
        raise ValueError(f"unknown agent backend '{name}' (backends: {', '.join(sorted(_REGISTRY))})")
    return _REGISTRY[name]()


def json_object_in(text: str) -> dict[str, Any] | None:
    """The first JSON object in a reply: a ```json fenced block, else the outermost {...}."""
    starts = [i for i in (text.find("```json"), text.find("```")) if i >= 0]
    if starts:
        body = text[min(starts) :].split("\n", 1)[-1]
        body = body.split("```", 1)[0]
        try:
            value = json.loads(body)
            if isinstance(value, dict):
                return value
        except json.JSONDecodeError:
            pass
    first, last = text.find("{"), text.rfind("}")
    if first < 0 or last <= first:
        return None
    try:
        value = json.loads(text[first : last + 1])
    except json.JSONDecodeError:
        return None
    return value if isinstance(value, dict) else None
