"""Prompt rendering: one Jinja2 template per task kind in `prompts/`, plus the role contract from
`.claude/agents/<role>.md`.

Every value handed to a template is redacted first and the rendered text once more, so a token
in a log tail, a spec or a model card never reaches an LLM endpoint. The prompt hash recorded on
the board is taken over the final (redacted) text.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import jinja2

from ascendbridge.agents.redact import redact, redact_value
from ascendbridge.config import REPO_ROOT
from ascendbridge.templating import strict_environment

PROMPTS_DIR = REPO_ROOT / "prompts"
ROLES_DIR = REPO_ROOT / ".claude" / "agents"
TASK_KINDS = ("heal", "adapt_unknown_family")


def _environment() -> jinja2.Environment:
    env = strict_environment(PROMPTS_DIR)
    env.filters["tojson"] = lambda value: json.dumps(value, indent=2, sort_keys=True, default=str)
    return env


def render_prompt(kind: str, context: dict[str, Any]) -> str:
    """The prompt for one task kind, rendered from redacted context and redacted again."""
    if kind not in TASK_KINDS:
        raise ValueError(f"unknown prompt kind '{kind}' (kinds: {', '.join(TASK_KINDS)})")
    try:
        template = _environment().get_template(f"{kind}.md.j2")
        redacted = redact_value(context)
        assert isinstance(redacted, dict)  # redact_value keeps a value's shape
        return redact(template.render(**redacted))
    except jinja2.UndefinedError as exc:
        raise ValueError(f"prompt '{kind}' needs a value the caller did not give: {exc.message}") from None


def role_contract(role: str) -> str:
    """The role file without its front matter (the part an agent must follow)."""
    path = ROLES_DIR / f"{role}.md"
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise ValueError(f"no role file {path}") from None
    if text.startswith("---\n"):
        end = text.find("\n---\n", 4)
        if end > 0:
            text = text[end + 5 :]
    return text.strip() + "\n"


def prompt_hash(prompt: str) -> str:
    return hashlib.sha256(prompt.encode()).hexdigest()[:16]
