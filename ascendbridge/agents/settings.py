"""Which backend each role uses, and the budget of one escalation, from settings or environment.

Resolution order for a role's backend: the run's settings `agent_backends[role]` (or
ASCENDBRIDGE_AGENT_BACKENDS), the variable ASCENDBRIDGE_AGENT_BACKEND_<ROLE> (e.g. ..._HEALER), the
run's settings `agent_backend` (or ASCENDBRIDGE_AGENT_BACKEND), AGENT_BACKEND, and finally
`builtin`, so nothing changes unless someone opts in. All of it is the `agent` section of
ascendbridge.settings (settings, then ASCENDBRIDGE_AGENT_*, then defaults).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import Field, field_validator
from pydantic_settings import SettingsConfigDict

from ascendbridge.settings import StageSettings

ROLES = ("team-lead", "adapter", "healer", "benchmark-runner")
BACKENDS = ("builtin", "claude", "codex", "openai")


class AgentConfig(StageSettings):
    """The `agent` section: which backend each role uses, the agent CLIs, and per migrated model and
    role how many agent runs, how much wall time and how many tokens (where the backend reports
    them) escalation may spend in total, and one run's timeout. Keys agent_* (ascendbridge.settings);
    the OpenAI API key is a credential, read by openai_backend.py itself, never part of settings."""

    model_config = SettingsConfigDict(env_prefix="ASCENDBRIDGE_AGENT_")
    key_prefix = "agent_"
    label = "agent"

    max_attempts: int = Field(2, gt=0)
    max_wall_s: float = Field(1800.0, gt=0)
    max_tokens: int = Field(400_000, gt=0)
    run_timeout_s: float = Field(900.0, gt=0, validation_alias="ascendbridge_agent_timeout_s")
    backend: str | None = None  # every role's backend (after a role's own); None: AGENT_BACKEND, then builtin
    backends: dict[str, str] = {}  # role -> backend (JSON in the environment)
    backend_team_lead: str | None = None
    backend_adapter: str | None = None
    backend_healer: str | None = None
    backend_benchmark_runner: str | None = None
    memory: Path | None = None  # the agent-memory folder; None: <repo>/.claude/agent-memory
    claude_bin: str = Field("claude", validation_alias="ascendbridge_claude_bin")  # a command line
    claude_model: str | None = Field(None, validation_alias="ascendbridge_claude_model")
    codex_bin: str = Field("codex", validation_alias="ascendbridge_codex_bin")
    codex_model: str | None = Field(None, validation_alias="ascendbridge_codex_model")
    openai_base_url: str | None = Field(None, validation_alias="ascendbridge_openai_base_url")
    openai_model: str | None = Field(None, validation_alias="ascendbridge_openai_model")

    @field_validator("backend", "backend_team_lead", "backend_adapter", "backend_healer", "backend_benchmark_runner")
    @classmethod
    def _known_backend(cls, value: str | None) -> str | None:
        return None if value is None else _backend(value)

    @field_validator("backends")
    @classmethod
    def _known_roles(cls, value: dict[str, str]) -> dict[str, str]:
        unknown_roles = sorted(set(value) - set(ROLES))
        if unknown_roles:
            raise ValueError(f"unknown agent role '{unknown_roles[0]}' (roles: {', '.join(ROLES)})")
        return {role: _backend(name) for role, name in value.items()}

    def role_backend(self, role: str) -> str | None:
        """The role's own choice: `agent_backends[role]`, then ASCENDBRIDGE_AGENT_BACKEND_<ROLE>."""
        return self.backends.get(role) or getattr(self, "backend_" + role.replace("-", "_"))


def _backend(name: str) -> str:
    name = name.strip().lower()
    if name not in BACKENDS:
        raise ValueError(f"unknown agent backend '{name}' (backends: {', '.join(BACKENDS)})")
    return name


@dataclass(frozen=True)
class AgentSettings:
    backends: Mapping[str, str]  # role -> backend name, every role resolved
    budget: AgentConfig

    def backend_for(self, role: str) -> str:
        if role not in ROLES:
            raise ValueError(f"unknown agent role '{role}' (roles: {', '.join(ROLES)})")
        return self.backends[role]

    @classmethod
    def from_sources(cls, settings: Mapping[str, Any] | None = None) -> AgentSettings:
        """Resolve every role's backend and the budget; raise ValueError (one line) on a bad value."""
        config = AgentConfig.from_sources(settings)
        default = config.backend or _backend(os.environ.get("AGENT_BACKEND") or "builtin")
        return cls(backends={role: config.role_backend(role) or default for role in ROLES}, budget=config)
