"""LLM agents as a bounded, audited escalation path (docs/agents.md).

The built-in agent (the deterministic rules in each stage) stays the default. A role may be
given an LLM backend (`claude`, `codex`, `openai`); it is asked only when the rules have no
answer, works in a copy of the adaptation directory, and its changes count only after the
stage's checker passed on them. See docs/agents.md.

Modules: settings (backend per role, budget), backend (interface, registry), cli_backends,
openai_backend, sandbox, prompts, redact, history (board records, budget use, memory), runner.
Import what you need from them; importing this package loads nothing (the board CLI reads
history without loading the backends).
"""
