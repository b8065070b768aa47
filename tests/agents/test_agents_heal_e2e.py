"""An escalated heal through the real healer: real generator, real uv environments, real
demo runs, the real check_adaptation.py on the agent's copy, and the real healing gate.
FakeAgentCli stands in for `claude` (no LLM exists here).

The failure (an n_embd override GPT-2 cannot build with) matches no healing rule, so the
built-in healer alone ends failed (see tests/healing). With the healer role on `claude`, the
agent's spec edit is checked on a copy, applied, re-run and gated. A second model with the same
failure is then healed from the recorded fix, without asking the agent again.
"""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from ascendbridge.agents.history import REUSE_EVENT, RUN_EVENT, memory_dir
from ascendbridge.board import BoardStore
from ascendbridge.config import REPO_ROOT
from ascendbridge.package.generator import render_adaptation
from ascendbridge.package.spec import AdaptationSpec, InputRecipe
from ascendbridge.stage_api import StageContext
from bench.support.local_model import local_context, register_local
from healing.stage import HEALING_STAGE
from tests.agents.agent_support import AgentScript, record_history

pytestmark = pytest.mark.slow  # fast tier: heals a real adaptation in a real uv environment

TINY_GPT2 = REPO_ROOT / "demo_models" / "tiny-gpt2"


def broken_adaptation(board: BoardStore, board_path: Path, model_id: str) -> tuple[StageContext, io.StringIO]:
    record, task, directory, spec = register_local(
        board,
        model_id,
        TINY_GPT2,
        "healing",
        "causal_lm",
        "GPT2LMHeadModel",
        "gpt2",
        inputs=InputRecipe(batch_size=2, seq_len=16),
        config_overrides={"n_embd": 30},  # 30 is no multiple of 4 heads
    )
    render_adaptation(spec, directory)
    log = io.StringIO()
    return local_context(record, task, directory, board_path, log, healing_max_attempts=3, device="cpu"), log


@pytest.mark.timeout(900)
def test_escalated_heal_passes_the_gate_and_is_reused_without_escalation(
    board: BoardStore, board_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    agent = AgentScript(tmp_path, monkeypatch)
    monkeypatch.setenv("AGENT_BACKEND", "claude")
    agent.set(
        {"set_json": "adaptation.json", "key": "config_overrides", "value": {}},
        usage={"input_tokens": 3000, "output_tokens": 400},
    )

    ctx, log = broken_adaptation(board, board_path, "demo/tiny-gpt2-a")
    outcome = HEALING_STAGE.run(ctx)
    record_history(board)
    assert outcome.status == "done", f"{outcome.summary}\n{log.getvalue()[-3000:]}"
    attempts = outcome.result["attempts"]
    assert attempts[0]["diagnosis"]["rule"] == "unclassified" and attempts[-1]["passed"]
    assert attempts[0]["fix"]["rule"] == "escalation:agent"
    spec = AdaptationSpec.load(ctx.adaptation_dir)
    assert spec.config_overrides == {} and spec.applied_fixes[0].changes == {"config_overrides": {}}
    gate = HEALING_STAGE.gate(ctx)
    assert gate.passed, gate.summary
    assert len(agent.calls()) == 1
    (run,) = [e.data for e in board.events_of_kind(RUN_EVENT)]
    assert (run["backend"], run["role"], run["outcome"], run["files_changed"], run["tokens"]) == (
        "claude",
        "healer",
        "accepted",
        ["adaptation.json"],
        3400,
    )
    assert "check_adaptation.py passed" in run["detail"]
    assert run["signature"] in (memory_dir() / "healer" / "MEMORY.md").read_text()

    # Same failure on another model: the recorded fix is reused; the agent is not asked again.
    agent.set({"exit": 9})  # were it asked, it would fail
    ctx2, log2 = broken_adaptation(board, board_path, "demo/tiny-gpt2-b")
    outcome2 = HEALING_STAGE.run(ctx2)
    record_history(board)
    assert outcome2.status == "done", f"{outcome2.summary}\n{log2.getvalue()[-3000:]}"
    assert outcome2.result["attempts"][0]["fix"]["rule"] == "escalation:memory"
    assert len(agent.calls()) == 1
    (reuse,) = board.events_of_kind(REUSE_EVENT)
    assert reuse.model_id == "demo/tiny-gpt2-b" and reuse.data["signature"] == run["signature"]
    assert AdaptationSpec.load(ctx2.adaptation_dir).applied_fixes[0].rule == "escalation:memory"
