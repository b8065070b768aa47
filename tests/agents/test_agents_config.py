"""Backend selection per role, budgets, failure signatures, prompts and role files, the agent
links, and `board_ops.py show` listing agent runs (through a real subprocess)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ascendbridge.agents.history import AgentRun, failure_signature, record_run
from ascendbridge.agents.prompts import TASK_KINDS, render_prompt, role_contract
from ascendbridge.agents.redact import redact
from ascendbridge.agents.settings import ROLES, AgentSettings
from ascendbridge.board import BoardStore
from ascendbridge.board.records import Registration
from ascendbridge.config import REPO_ROOT
from tests.agents.agent_support import dry_run_diagnosis, record_history


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name == "AGENT_BACKEND" or name.startswith("ASCENDBRIDGE_AGENT_"):
            monkeypatch.delenv(name)


def test_builtin_is_the_default_for_every_role() -> None:
    settings = AgentSettings.from_sources()
    assert all(settings.backend_for(role) == "builtin" for role in ROLES)


def test_selection_order_settings_role_then_env_role_then_global(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENT_BACKEND", "codex")
    monkeypatch.setenv("ASCENDBRIDGE_AGENT_BACKEND_ADAPTER", "openai")
    settings = AgentSettings.from_sources({"agent_backends": {"healer": "claude"}})
    assert (settings.backend_for("healer"), settings.backend_for("adapter"), settings.backend_for("team-lead")) == (
        "claude",
        "openai",
        "codex",
    )
    assert AgentSettings.from_sources({"agent_backend": "claude"}).backend_for("team-lead") == "claude"


@pytest.mark.parametrize(
    "settings, message",
    [
        ({"agent_backend": "gpt-42"}, "unknown agent backend 'gpt-42'"),
        ({"agent_backends": {"janitor": "claude"}}, "unknown agent role 'janitor'"),
        ({"agent_max_attempts": "two"}, "agent_max_attempts: Input should be a valid integer"),
        ({"agent_timeout_s": -5}, "agent_timeout_s: Input should be greater than 0"),
    ],
)
def test_bad_settings_are_one_clear_error(settings: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message.replace("(", r"\(")):
        AgentSettings.from_sources(settings)


def test_budget_from_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ASCENDBRIDGE_AGENT_MAX_ATTEMPTS", "7")
    monkeypatch.setenv("ASCENDBRIDGE_AGENT_TIMEOUT_S", "30")
    budget = AgentSettings.from_sources({"agent_max_tokens": 5000}).budget
    assert (budget.max_attempts, budget.run_timeout_s, budget.max_tokens) == (7, 30.0, 5000)


def test_failure_signature_ignores_sizes_and_paths_but_not_the_error() -> None:
    a = failure_signature(
        "healer",
        "dry_run",
        "unclassified",
        "ValueError: The hidden size (30) is not a multiple of the number of attention heads (4)",
    )
    b = failure_signature(
        "healer",
        "dry_run",
        "unclassified",
        "ValueError: The hidden size (66) is not a multiple of the number of attention heads (8)",
    )
    c = failure_signature("healer", "dry_run", "unclassified", "KeyError: 'rope_theta'")
    d = failure_signature(
        "adapter",
        "dry_run",
        "unclassified",
        "ValueError: The hidden size (30) is not a multiple of the number of attention heads (4)",
    )
    assert a == b and a != c and a != d
    assert failure_signature("healer", "lock", "x", "no file /tmp/a/b/uv.lock") == failure_signature(
        "healer", "lock", "x", "no file /home/u/adaptations/q/uv.lock"
    )


def test_redaction_keeps_digests_and_paths() -> None:
    text = "spec sha256 3f786850e387550fdab836ed7e6dc881de23001b3f786850e387550fdab836ed at /tmp/Pytest-Of-Root1/x"
    assert redact(text) == text
    assert "eyJ" not in redact(
        "jwt eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV"
    )


def test_every_task_kind_renders_and_every_role_has_a_contract() -> None:
    model = {"model_id": "org/m", "architecture": "XForY", "model_type": "x", "source": "local", "path": "/m"}
    spec = {"name": "org__m", "task_family": "causal_lm", "model_class": "AutoModelForCausalLM"}
    contexts = {
        "heal": {
            "model": model,
            "spec": spec,
            "failing_command": "uv run python demo.py --dry-run",
            "diagnosis": dry_run_diagnosis("E"),
            "log_tail": "tail",
            "checker_report": "none",
        },
        "adapt_unknown_family": {
            "model": model,
            "name": "org__m",
            "refusal": {"rule": "unknown_task_family", "summary": "no family"},
            "metadata": {"k": 1},
            "task_families": ["causal_lm"],
        },
    }
    for kind in TASK_KINDS:
        assert "org/m" in render_prompt(kind, contexts[kind])
    with pytest.raises(ValueError, match="needs a value"):
        render_prompt("heal", {"model": model})
    for role in ROLES:
        contract = role_contract(role)
        assert not contract.startswith("---") and "## What you may change" in contract
        assert "## Completion" in contract and "checker" in contract.lower()


def test_agent_links_are_restored_by_the_script(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    (repo / "scripts").mkdir(parents=True)
    (repo / ".claude").mkdir()
    (repo / "CLAUDE.md").write_text("context\n")
    script = repo / "scripts" / "ensure_agent_symlinks.sh"
    script.write_bytes((REPO_ROOT / "scripts" / "ensure_agent_symlinks.sh").read_bytes())
    script.chmod(0o755)
    first = subprocess.run([str(script)], capture_output=True, text=True)
    assert first.returncode == 0 and (repo / "AGENTS.md").read_text() == "context\n"
    assert os.readlink(repo / ".agents") == ".claude"
    again = subprocess.run([str(script)], capture_output=True, text=True)
    assert again.returncode == 0 and again.stdout.count("ok:") == 2
    (repo / "AGENTS.md").unlink()
    (repo / "AGENTS.md").write_text("a real file\n")
    blocked = subprocess.run([str(script)], capture_output=True, text=True)
    assert blocked.returncode == 1 and blocked.stderr.startswith("error: AGENTS.md exists")
    assert os.readlink(REPO_ROOT / "AGENTS.md") == "CLAUDE.md" and os.readlink(REPO_ROOT / ".agents") == ".claude"


def test_board_ops_show_lists_agent_runs(board: BoardStore, board_path: Path, tmp_path: Path) -> None:
    board.register_models([Registration(model_id="org/m", source="local", path="/m")])
    record_run(
        AgentRun(
            backend="openai",
            role="healer",
            kind="heal",
            outcome="rejected_gate",
            duration_s=4.2,
            files_changed=["adaptation.json"],
            prompt_hash="abcd1234abcd1234",
            tokens=2100,
            detail="check_adaptation.py failed",
            model_id="org/m",
            stage="healing",
        )
    )
    record_history(board)
    script = REPO_ROOT / "scripts" / "board_ops.py"

    def show(*flags: str) -> str:
        argv = [sys.executable, str(script), "--board", str(board_path), *flags, "show", "org/m"]
        proc = subprocess.run(argv, capture_output=True, text=True, cwd=tmp_path, timeout=60)
        assert proc.returncode == 0, proc.stderr
        return proc.stdout

    narrow = ("healer", "openai", "rejected_gate")  # 100 columns: the detail columns wait for --wide
    for flags, values in (((), narrow), (("--wide",), (*narrow, "2100", "adaptation.json", "abcd1234abcd1234"))):
        text = show(*flags)
        section = text[text.index("agent runs") :]
        for value in values:
            assert value in section, (flags, value)
    (run,) = json.loads(show("--json"))["agent_runs"]
    assert (run["backend"], run["outcome"], run["tokens"], run["duration_s"]) == ("openai", "rejected_gate", 2100, 4.2)
