"""Shared helpers for the agent tests: a small real adaptation directory on a real board, and
the scripted agent CLI (tests/agents/fake_agent_cli.py) wired in as `claude` and `codex`."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from ascendbridge import stage_events
from ascendbridge.board import BoardStore, UnknownModelError
from ascendbridge.board.records import NewEvent, Registration
from ascendbridge.package.spec import AdaptationSpec, ModelSource

FAKE_CLI = Path(__file__).resolve().parent / "fake_agent_cli.py"


def dry_run_diagnosis(error: str) -> dict[str, Any]:
    """What a heal task carries of a dry run that exited 1 with `error` under no known rule."""
    return dict(rule="unclassified", summary="s", phase="dry_run", exit_code=1, timed_out=False, error=error)


def record_history(board: BoardStore) -> None:
    """Play the team lead for stages run in this process: write the agent-history events they kept
    (a worker puts them in its outcome; the team lead writes them with the attempt's verdict)."""
    for event in stage_events.take_events():
        model_id = event.data.get("model_id")
        try:
            board.add_event(NewEvent(event.kind, event.message, model_id, data=event.data, origin=event.origin))
        except UnknownModelError:
            board.add_event(NewEvent(event.kind, event.message, data=event.data, origin=event.origin))


class AgentScript:
    """The FakeAgentCli's script and call log for one test."""

    def __init__(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        self.script = tmp_path / "agent_script.json"
        self.log = tmp_path / "agent_calls.jsonl"
        self.log.touch()
        self.set()
        command = f"{sys.executable} {FAKE_CLI}"
        monkeypatch.setenv("FAKE_AGENT_SCRIPT", str(self.script))
        monkeypatch.setenv("FAKE_AGENT_LOG", str(self.log))
        monkeypatch.setenv("ASCENDBRIDGE_CLAUDE_BIN", command)
        monkeypatch.setenv("ASCENDBRIDGE_CODEX_BIN", command)
        monkeypatch.setenv("ASCENDBRIDGE_AGENT_MEMORY", str(tmp_path / "agent-memory"))
        for name in ("AGENT_BACKEND", "ASCENDBRIDGE_AGENT_BACKEND_HEALER", "ASCENDBRIDGE_AGENT_MAX_ATTEMPTS"):
            monkeypatch.delenv(name, raising=False)

    def set(self, *actions: dict[str, Any], usage: dict[str, int] | None = None) -> None:
        self.script.write_text(json.dumps({"actions": list(actions), "usage": usage or {}}))

    def calls(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.log.read_text().splitlines() if line.strip()]


def make_adaptation(
    board: BoardStore, adaptations: Path, model_id: str = "demo/tiny-gpt2", overrides: dict[str, Any] | None = None
) -> tuple[str, Path]:
    """Register a model and write its adaptation.json (plus one rendered-looking file)."""
    ((record, _),) = board.register_models([Registration(model_id=model_id, source="local", path="/nonexistent")])
    directory = adaptations / record.adaptation_name
    directory.mkdir(parents=True)
    spec = AdaptationSpec(
        name=record.adaptation_name,
        task_family="causal_lm",
        model_class="GPT2LMHeadModel",
        model=ModelSource(model_id=model_id, source="local", path="/nonexistent", has_weights=False),
        config_overrides=overrides or {"n_embd": 30},
    )
    spec.save(directory)
    (directory / "demo.py").write_text("print('rendered')\n")
    return record.model_id, directory


def tree(directory: Path) -> dict[str, bytes]:
    return {p.relative_to(directory).as_posix(): p.read_bytes() for p in sorted(directory.rglob("*")) if p.is_file()}
