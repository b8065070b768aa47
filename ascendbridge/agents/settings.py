"""Which backend each role uses, and the budget of one escalation, from settings or environment.

Resolution order for a role's backend: the run's settings `agent_backends[role]`, the variable
ASCENDBRIDGE_AGENT_BACKEND_<ROLE> (e.g. ..._HEALER), the run's settings `agent_backend`,
AGENT_BACKEND, and finally `builtin`, so nothing changes unless someone opts in. The budget is
an ascendbridge.settings class like every stage's (settings, then ASCENDBRIDGE_AGENT_*, then defaults).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Mapping, Optional

from pydantic import Field
from pydantic_settings import SettingsConfigDict

from ascendbridge.settings import StageSettings

ROLES = ("team-lead", "adapter", "healer", "benchmark-runner")
BACKENDS = ("builtin", "claude", "codex", "openai")


class Budget(StageSettings):
    """Per migrated model and role: how many agent runs, how much wall time and how many tokens
    (where the backend reports them) escalation may spend in total, and one run's timeout.
    Keys agent_max_attempts, agent_max_wall_s, agent_max_tokens, agent_timeout_s (ascendbridge.settings)."""

    model_config = SettingsConfigDict(env_prefix="ASCENDBRIDGE_AGENT_")
    key_prefix = "agent_"

    max_attempts: int = Field(2, gt=0)
    max_wall_s: float = Field(1800.0, gt=0)
    max_tokens: int = Field(400_000, gt=0)
    run_timeout_s: float = Field(900.0, gt=0, validation_alias="ascendbridge_agent_timeout_s")


def _role_env(role: str) -> str:
    return "ASCENDBRIDGE_AGENT_BACKEND_" + role.upper().replace("-", "_")


@dataclass(frozen=True)
class AgentSettings:
    backends: Mapping[str, str]  # role -> backend name, every role resolved
    budget: Budget

    def backend_for(self, role: str) -> str:
        if role not in ROLES:
            raise ValueError(f"unknown agent role '{role}' (roles: {', '.join(ROLES)})")
        return self.backends[role]

    @classmethod
    def from_sources(cls, settings: Optional[Mapping[str, Any]] = None) -> "AgentSettings":
        """Resolve every role's backend and the budget; raise ValueError on a bad value."""
        settings = settings or {}
        per_role = settings.get("agent_backends") or {}
        if not isinstance(per_role, Mapping):
            raise ValueError("bad agent setting agent_backends: expected a role -> backend mapping")
        unknown_roles = sorted(set(per_role) - set(ROLES))
        if unknown_roles:
            raise ValueError(f"unknown agent role '{unknown_roles[0]}' (roles: {', '.join(ROLES)})")
        default = settings.get("agent_backend") or os.environ.get("AGENT_BACKEND") or "builtin"
        backends = {
            role: str(per_role.get(role) or os.environ.get(_role_env(role)) or default).strip().lower()
            for role in ROLES
        }
        for role, name in backends.items():
            if name not in BACKENDS:
                raise ValueError(f"unknown agent backend '{name}' for role {role} (backends: {', '.join(BACKENDS)})")

        budget = Budget.from_sources(settings)
        return cls(backends=backends, budget=budget)
