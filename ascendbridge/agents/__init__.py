"""LLM agents as a bounded, audited escalation path (DESIGN.md section 6).

The built-in agent (the deterministic rules in each stage) stays the default. A role may be
given an LLM backend (`claude`, `codex`, `openai`); it is asked only when the rules have no
answer, works in a copy of the adaptation directory, and its changes count only after the
stage's checker passed on them. See docs/agents.md.
"""

from ascendbridge.agents.history import AgentRun, failure_signature
from ascendbridge.agents.runner import AgentTask, Verdict, run_agent
from ascendbridge.agents.settings import BACKENDS, ROLES, AgentSettings, Budget

__all__ = ["AgentRun", "AgentSettings", "AgentTask", "BACKENDS", "Budget", "ROLES", "Verdict", "failure_signature",
           "run_agent"]
