"""Which backend each role uses, and the budget of one escalation, from settings or environment.

Resolution order for a role's backend: the run's settings `agent_backends[role]`, the variable
ASCENDBRIDGE_AGENT_BACKEND_<ROLE> (e.g. ..._HEALER), the run's settings `agent_backend`,
AGENT_BACKEND, and finally `builtin`, so nothing changes unless someone opts in.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Mapping, Optional

ROLES = ("team-lead", "adapter", "healer", "benchmark-runner", "npu-optimizer")
BACKENDS = ("builtin", "claude", "codex", "openai")


@dataclass(frozen=True)
class Budget:
    """Per migrated model and role: how many agent runs, how much wall time and how many tokens
    (where the backend reports them) escalation may spend in total, and one run's timeout."""

    max_attempts: int = 2
    max_wall_s: float = 1800.0
    max_tokens: int = 400_000
    run_timeout_s: float = 900.0


def _role_env(role: str) -> str:
    return "ASCENDBRIDGE_AGENT_BACKEND_" + role.upper().replace("-", "_")


def _number(raw: Any, name: str, kind: type) -> Any:
    try:
        value = kind(raw)
    except (TypeError, ValueError):
        raise ValueError(f"bad agent setting {name}={raw!r}: not a number") from None
    if value <= 0:
        raise ValueError(f"bad agent setting {name}={raw!r}: must be positive")
    return value


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

        def pick(key: str, kind: type, default: Any) -> Any:
            env = "ASCENDBRIDGE_" + key.upper()
            raw = settings.get(key) if settings.get(key) is not None else os.environ.get(env)
            return default if raw in (None, "") else _number(raw, key, kind)

        base = Budget()
        budget = Budget(
            max_attempts=pick("agent_max_attempts", int, base.max_attempts),
            max_wall_s=pick("agent_max_wall_s", float, base.max_wall_s),
            max_tokens=pick("agent_max_tokens", int, base.max_tokens),
            run_timeout_s=pick("agent_timeout_s", float, base.run_timeout_s),
        )
        return cls(backends=backends, budget=budget)
