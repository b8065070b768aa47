"""The adapter's escalation through the real Adaptation stage: a model the built-in adapter
refuses (no known task family) gets a spec from the adapter role's agent (FakeAgentCli as
`claude`), accepted only after check_adaptation.py passed on the rendered copy; a bad proposal is
rejected; a model with the same refusal signature reuses the spec without asking."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from adaptation.stage import ADAPTATION_STAGE
from ascendbridge.agents.history import REUSE_EVENT, RUN_EVENT
from ascendbridge.board import BoardStore
from ascendbridge.board.records import ModelRecord, Registration
from ascendbridge.config import REPO_ROOT, adaptations_dir
from ascendbridge.package.spec import AdaptationSpec
from ascendbridge.stage_api import StageContext
from tests.agents.agent_support import AgentScript, record_history

TINY_GPT2 = REPO_ROOT / "demo_models" / "tiny-gpt2"


def unknown_model(board: BoardStore, model_id: str) -> ModelRecord:
    board.register_models([Registration(model_id=model_id, source="local", path=str(TINY_GPT2))])
    return board.update_model_metadata(model_id, {"architecture": "GPT2LMHeadModel", "model_type": "gpt2-unusual"}, {})


def context(board: BoardStore, board_path: Path, record: ModelRecord) -> StageContext:
    task = board.list_tasks(stage="adaptation", model_id=record.model_id)[0]
    return StageContext(
        model=record,
        task=task,
        adaptation_dir=adaptations_dir() / record.adaptation_name,
        board_path=board_path,
        log=io.StringIO(),
        settings={},
    )


@pytest.mark.timeout(600)
@pytest.mark.slow  # fast tier: real adaptations, twice
def test_unknown_family_is_adapted_by_the_agent_then_from_memory(
    board: BoardStore, board_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    agent = AgentScript(tmp_path, monkeypatch)
    record = unknown_model(board, "lab/odd-gpt2")
    ctx = context(board, board_path, record)

    refused = ADAPTATION_STAGE.run(ctx)  # built-in agent: the refusal stands, nobody is asked
    record_history(board)
    assert refused.status == "failed" and refused.diagnosis["rule"] == "unknown_task_family"
    assert agent.calls() == []

    monkeypatch.setenv("ASCENDBRIDGE_AGENT_BACKEND_ADAPTER", "claude")
    agent.set(
        {"set_json": "adaptation.json", "key": "task_family", "value": "telepathy"},
        {"set_json": "adaptation.json", "key": "model_class", "value": "GPT2LMHeadModel"},
    )
    rejected = ADAPTATION_STAGE.run(ctx)
    record_history(board)
    assert rejected.status == "failed"
    assert [e.data["outcome"] for e in board.events_of_kind(RUN_EVENT)] == ["rejected_gate"]
    assert "telepathy" in board.events_of_kind(RUN_EVENT)[0].data["detail"]

    agent.set(
        {"set_json": "adaptation.json", "key": "task_family", "value": "causal_lm"},
        {"set_json": "adaptation.json", "key": "model_class", "value": "GPT2LMHeadModel"},
        {"set_json": "adaptation.json", "key": "model/model_id", "value": "someone/else"},
    )
    assert ADAPTATION_STAGE.run(ctx).status == "failed"  # identity changed: rejected
    record_history(board)
    assert "may not change" in board.events_of_kind(RUN_EVENT)[0].data["detail"]

    monkeypatch.setenv("ASCENDBRIDGE_AGENT_MAX_ATTEMPTS", "4")

    agent.set(
        {"set_json": "adaptation.json", "key": "task_family", "value": "causal_lm"},
        {"set_json": "adaptation.json", "key": "model_class", "value": "GPT2LMHeadModel"},
        {"set_json": "adaptation.json", "key": "tolerances/float32", "value": {"cosine_min": 0.5}},
    )
    assert ADAPTATION_STAGE.run(ctx).status == "failed"  # thresholds are the framework's: refused, with why
    record_history(board)
    detail = board.events_of_kind(RUN_EVENT)[0].data["detail"]
    assert "changed tolerances" in detail and "framework's standard" in detail

    agent.set(
        {"set_json": "adaptation.json", "key": "task_family", "value": "causal_lm"},
        {"set_json": "adaptation.json", "key": "model_class", "value": "GPT2LMHeadModel"},
    )
    done = ADAPTATION_STAGE.run(ctx)
    record_history(board)
    assert done.status == "done", done.summary
    spec = AdaptationSpec.load(ctx.adaptation_dir)
    assert (spec.task_family, spec.model_class, spec.model.model_id) == ("causal_lm", "GPT2LMHeadModel", "lab/odd-gpt2")
    accepted = board.events_of_kind(RUN_EVENT)[0].data
    assert accepted["outcome"] == "accepted" and "check_adaptation.py passed" in accepted["detail"]
    assert len(agent.calls()) == 4

    other = unknown_model(board, "lab/odd-gpt2-twin")
    reused = ADAPTATION_STAGE.run(context(board, board_path, other))
    record_history(board)
    assert reused.status == "done", reused.summary
    assert len(agent.calls()) == 4  # not asked again
    assert board.events_of_kind(REUSE_EVENT)[0].model_id == "lab/odd-gpt2-twin"
