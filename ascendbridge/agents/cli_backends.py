"""Agent CLIs as backends: Claude Code in print mode and Codex in exec mode.

Both run in the workspace copy (cwd), in their own process group with a hard timeout
(ascendbridge.workers.process.run_command), stdin closed, and without Hugging Face credentials.
Flags (from each tool's CLI reference):

- claude -p PROMPT --output-format json --permission-mode acceptEdits
  --allowedTools "Read Edit Write Glob Grep" --append-system-prompt CONTRACT --max-turns N
  (the JSON result carries `usage`, so tokens count against the budget)
- codex exec --sandbox workspace-write --skip-git-repo-check --ephemeral --json -C WORKSPACE PROMPT
  (Codex has no system-prompt flag, so the role contract leads the prompt; its JSON events
  carry `usage`)

The executables are `claude` / `codex` on PATH unless ASCENDBRIDGE_CLAUDE_BIN /
ASCENDBRIDGE_CODEX_BIN say otherwise (a command line); ASCENDBRIDGE_CLAUDE_MODEL /
ASCENDBRIDGE_CODEX_MODEL pick the model (the `agent` section of ascendbridge.settings).
"""

from __future__ import annotations

import shlex

from ascendbridge.agents.backend import (
    BackendReply,
    BackendRequest,
    agent_environment,
    register_backend,
    reported_tokens,
)
from ascendbridge.agents.settings import AgentConfig
from ascendbridge.settings import section
from ascendbridge.workers.process import run_command

MAX_TURNS = 30
_OUTPUT_CAP = 2_000_000


def _config() -> AgentConfig:
    return section(AgentConfig)


def _run(argv: list[str], request: BackendRequest, tool: str, variable: str) -> BackendReply:
    try:
        result = run_command(
            argv, cwd=request.workspace, env=agent_environment(), timeout_s=request.timeout_s, output_cap=_OUTPUT_CAP
        )
    except OSError as exc:
        return BackendReply(None, False, "", error=f"cannot start the {tool} CLI ({exc}); install it or set {variable}")
    error = "" if result.exit_code == 0 or result.timed_out else f"{tool} exited with code {result.exit_code}"
    return BackendReply(result.exit_code, result.timed_out, result.output, reported_tokens(result.output), error=error)


class ClaudeBackend:
    name = "claude"

    def run(self, request: BackendRequest) -> BackendReply:
        config = _config()
        argv = [*shlex.split(config.claude_bin), "-p", request.prompt, "--output-format", "json"]
        argv += ["--permission-mode", "acceptEdits", "--allowedTools", "Read Edit Write Glob Grep"]
        argv += ["--append-system-prompt", request.role_contract, "--max-turns", str(MAX_TURNS)]
        if config.claude_model:
            argv += ["--model", config.claude_model]
        return _run(argv, request, "claude", "ASCENDBRIDGE_CLAUDE_BIN")


class CodexBackend:
    name = "codex"

    def run(self, request: BackendRequest) -> BackendReply:
        config = _config()
        argv = [*shlex.split(config.codex_bin), "exec", "--sandbox", "workspace-write", "--skip-git-repo-check"]
        argv += ["--ephemeral", "--json", "-C", str(request.workspace)]
        if config.codex_model:
            argv += ["-m", config.codex_model]
        argv.append(f"{request.role_contract}\n\n---\n\n{request.prompt}")
        return _run(argv, request, "codex", "ASCENDBRIDGE_CODEX_BIN")


register_backend("claude", ClaudeBackend)
register_backend("codex", CodexBackend)
