"""The escalation runner end to end with real subprocesses, a real board and real files: the
scripted FakeAgentCli stands in for claude/codex and FakeChatCompletionsServer for an
OpenAI-compatible endpoint (no LLM exists here). The checker in these tests is the spec contract
itself (AdaptationSpec validation plus "the override is gone"); the healer's real checker
(check_adaptation.py on a re-rendered copy) is exercised in test_agents_heal_e2e.py."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from ascendbridge.agents.history import RUN_EVENT, memory_dir
from ascendbridge.agents.runner import AgentTask, Verdict, run_agent
from ascendbridge.board import BoardStore
from ascendbridge.package.spec import AdaptationSpec
from tests.agents.agent_support import AgentScript, dry_run_diagnosis, make_adaptation, record_history, tree
from tests.agents.chat_server import FakeChatCompletionsServer

SECRET = "hf_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789"


@pytest.fixture()
def agent(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AgentScript:
    return AgentScript(tmp_path, monkeypatch)


def spec_check(copy: Path, changed: list[str]) -> Verdict:
    """Accept a copy whose adaptation.json is a valid spec without the bad override."""
    try:
        spec = AdaptationSpec.load(copy)
    except ValueError as exc:
        return Verdict(False, f"invalid spec: {str(exc).splitlines()[0]}")
    if "n_embd" in spec.config_overrides:
        return Verdict(False, "n_embd override still there")
    return Verdict(True, "spec valid, override removed", {"config_overrides": spec.config_overrides})


def heal_task(directory: Path, model_id: str, **settings: object) -> AgentTask:
    return AgentTask(
        role="healer",
        kind="heal",
        directory=directory,
        model_id=model_id,
        stage="healing",
        signature="sig0001",
        failure="ValueError: not a multiple",
        settings={"agent_backend": "claude", **settings},
        context={
            "model": {"model_id": model_id, "architecture": "GPT2LMHeadModel", "model_type": "gpt2"},
            "spec": json.loads((directory / "adaptation.json").read_text()),
            "failing_command": "uv run python demo.py --dry-run --device cpu",
            "diagnosis": dry_run_diagnosis("ValueError: x"),
            "log_tail": "Traceback ...\nValueError: x",
            "checker_report": "not run",
        },
    )


def runs(board: BoardStore) -> list[dict]:
    record_history(board)
    return [e.data for e in board.events_of_kind(RUN_EVENT)]


def test_builtin_backend_asks_nobody(board: BoardStore, board_path: Path, agent: AgentScript) -> None:
    model_id, directory = make_adaptation(board, board_path.parent / "adaptations")
    task = heal_task(directory, model_id)
    task.settings = {}
    assert run_agent(task, spec_check, board_path, print) is None
    assert agent.calls() == [] and runs(board) == []


def test_accepted_change_is_applied_recorded_and_remembered(
    board: BoardStore, board_path: Path, agent: AgentScript
) -> None:
    model_id, directory = make_adaptation(board, board_path.parent / "adaptations")
    agent.set(
        {"set_json": "adaptation.json", "key": "config_overrides", "value": {}},
        usage={"input_tokens": 1200, "output_tokens": 300},
    )
    run = run_agent(heal_task(directory, model_id), spec_check, board_path, print)
    assert run is not None and run.outcome == "accepted", run
    assert AdaptationSpec.load(directory).config_overrides == {}  # applied to the real directory
    (call,) = agent.calls()
    assert (
        call["argv"][0] == "-p"
        and "--append-system-prompt" in call["argv"]
        and "Role: healer" in " ".join(call["argv"])
    )
    assert Path(call["cwd"]).name == directory.name and Path(call["cwd"]) != directory  # a copy, not the original
    assert not Path(call["cwd"]).exists()  # workspace removed
    (recorded,) = runs(board)
    assert (
        recorded["backend"],
        recorded["role"],
        recorded["outcome"],
        recorded["files_changed"],
        recorded["tokens"],
    ) == ("claude", "healer", "accepted", ["adaptation.json"], 1500)
    assert len(recorded["prompt_hash"]) == 16 and recorded["duration_s"] > 0
    memory = (memory_dir() / "healer" / "MEMORY.md").read_text()
    assert "sig0001" in memory and "config_overrides" in memory


def test_edit_outside_the_directory_is_rejected_and_undone(
    board: BoardStore, board_path: Path, agent: AgentScript
) -> None:
    model_id, directory = make_adaptation(board, board_path.parent / "adaptations")
    before = tree(directory)
    agent.set(
        {"set_json": "adaptation.json", "key": "config_overrides", "value": {}},  # a good edit inside ...
        {"write": str(directory / "demo.py"), "text": "import os; os.system('rm -rf /')\n"},  # ... the real dir
        {"write": "../escaped.txt", "text": "outside the copy\n"},
    )
    run = run_agent(heal_task(directory, model_id), spec_check, board_path, print)
    assert run is not None and run.outcome == "rejected_outside", run
    assert "demo.py" in run.detail and "escaped.txt" in run.detail
    assert tree(directory) == before  # the outside edit was undone, the inside edit never applied
    assert runs(board)[0]["outcome"] == "rejected_outside"
    assert not (memory_dir() / "healer" / "MEMORY.md").exists()


def test_change_failing_the_checker_is_discarded(board: BoardStore, board_path: Path, agent: AgentScript) -> None:
    model_id, directory = make_adaptation(board, board_path.parent / "adaptations")
    before = tree(directory)
    agent.set({"set_json": "adaptation.json", "key": "inputs/batch_size", "value": "many"})
    run = run_agent(heal_task(directory, model_id), spec_check, board_path, print)
    assert run is not None and run.outcome == "rejected_gate" and "invalid spec" in run.detail
    assert tree(directory) == before


def test_attempt_and_token_budgets_are_enforced(board: BoardStore, board_path: Path, agent: AgentScript) -> None:
    model_id, directory = make_adaptation(board, board_path.parent / "adaptations")
    agent.set(usage={"input_tokens": 900, "output_tokens": 200})  # changes nothing
    first = run_agent(
        heal_task(directory, model_id, agent_max_attempts=5, agent_max_tokens=1000), spec_check, board_path, print
    )
    assert first is not None and first.outcome == "no_change" and first.tokens == 1100
    second = run_agent(
        heal_task(directory, model_id, agent_max_attempts=5, agent_max_tokens=1000), spec_check, board_path, print
    )
    assert second is not None and second.outcome == "budget_exhausted" and "token budget" in second.detail
    third = run_agent(heal_task(directory, model_id, agent_max_attempts=1), spec_check, board_path, print)
    assert third is not None and third.outcome == "budget_exhausted" and "attempt budget" in third.detail
    assert len(agent.calls()) == 1  # exhausted budgets never start the agent
    assert [r["outcome"] for r in runs(board)] == ["budget_exhausted", "budget_exhausted", "no_change"]


def test_hanging_agent_is_killed_at_its_timeout(board: BoardStore, board_path: Path, agent: AgentScript) -> None:
    model_id, directory = make_adaptation(board, board_path.parent / "adaptations")
    before = tree(directory)
    agent.set({"set_json": "adaptation.json", "key": "config_overrides", "value": {}}, {"sleep": 120})
    start = time.monotonic()
    run = run_agent(heal_task(directory, model_id, agent_timeout_s=2), spec_check, board_path, print)
    assert time.monotonic() - start < 15
    assert run is not None and run.outcome == "timeout" and "2 s" in run.detail
    assert tree(directory) == before  # half-done work of a killed agent is discarded


def test_secrets_never_reach_the_prompt_or_the_board(
    board: BoardStore, board_path: Path, agent: AgentScript, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HF_TOKEN", SECRET)
    monkeypatch.setenv("MY_SERVICE_API_KEY", "s3cr3t-value-1234")
    model_id, directory = make_adaptation(board, board_path.parent / "adaptations")
    task = heal_task(directory, model_id)
    task.context["log_tail"] = (
        f"requests to https://huggingface.co?token={SECRET} failed\n"
        "Authorization: Bearer sk-proj-abcdefghijklmnopqrstuvwxyz012345\n"
        "api_key=s3cr3t-value-1234 ghp_0123456789abcdefghijklmnopqrstuvwxyzAB"
    )
    run_agent(task, spec_check, board_path, print)
    (call,) = agent.calls()
    prompt = call["prompt"]
    assert "[REDACTED]" in prompt and "requests to https://huggingface.co" in prompt
    for secret in (SECRET, "sk-proj-abcdefghijklmnopqrstuvwxyz012345", "s3cr3t-value-1234", "ghp_0123456789abcdef"):
        assert secret not in prompt and secret not in " ".join(call["argv"])
    assert call["env_has_hf_token"] is False  # the agent process never gets the HF token
    record_history(board)
    board_text = json.dumps([e.model_dump() for e in board.list_events(limit=1000)])
    assert SECRET not in board_text and "s3cr3t-value-1234" not in board_text


def test_codex_backend_runs_exec_in_the_workspace(board: BoardStore, board_path: Path, agent: AgentScript) -> None:
    model_id, directory = make_adaptation(board, board_path.parent / "adaptations")
    agent.set({"set_json": "adaptation.json", "key": "config_overrides", "value": {}})
    task = heal_task(directory, model_id)
    task.settings = {"agent_backends": {"healer": "codex"}, "agent_backend": "claude"}  # per role wins
    run = run_agent(task, spec_check, board_path, print)
    assert run is not None and (run.backend, run.outcome) == ("codex", "accepted")
    argv = agent.calls()[0]["argv"]
    assert (
        argv[:2] == ["exec", "--sandbox"]
        and "workspace-write" in argv
        and argv[argv.index("-C") + 1] == agent.calls()[0]["cwd"]
    )
    assert argv[-1].startswith("# Role: healer")  # codex has no system prompt flag: the contract leads


def _openai_env(monkeypatch: pytest.MonkeyPatch, server: FakeChatCompletionsServer) -> None:
    monkeypatch.setenv("ASCENDBRIDGE_OPENAI_BASE_URL", server.base_url)
    monkeypatch.setenv("ASCENDBRIDGE_OPENAI_MODEL", "local-test-model")
    monkeypatch.setenv("ASCENDBRIDGE_OPENAI_API_KEY", "sk-localtestkey0123456789abcdef")


def test_openai_backend_edits_through_the_sandbox(
    board: BoardStore, board_path: Path, agent: AgentScript, monkeypatch: pytest.MonkeyPatch
) -> None:
    model_id, directory = make_adaptation(board, board_path.parent / "adaptations")
    spec = json.loads((directory / "adaptation.json").read_text())
    spec["config_overrides"] = {}
    answer = (
        "Here is the fix:\n```json\n"
        + json.dumps({"summary": "drop the n_embd override", "files": {"adaptation.json": spec}})
        + "\n```"
    )
    with FakeChatCompletionsServer(answer, total_tokens=2500) as server:
        _openai_env(monkeypatch, server)
        task = heal_task(directory, model_id, agent_backend="openai")
        run = run_agent(task, spec_check, board_path, print)
    assert run is not None and (run.backend, run.outcome, run.tokens) == ("openai", "accepted", 2500), run
    assert AdaptationSpec.load(directory).config_overrides == {}
    (request,) = server.requests
    assert request["headers"]["Authorization"] == "Bearer sk-localtestkey0123456789abcdef"
    body = request["body"]
    assert body["model"] == "local-test-model" and [m["role"] for m in body["messages"]] == ["system", "user"]
    assert "Role: healer" in body["messages"][0]["content"] and "adaptation.json" in body["messages"][1]["content"]
    assert "sk-localtestkey" not in body["messages"][1]["content"]


def test_openai_answer_writing_outside_is_rejected(
    board: BoardStore, board_path: Path, agent: AgentScript, monkeypatch: pytest.MonkeyPatch
) -> None:
    model_id, directory = make_adaptation(board, board_path.parent / "adaptations")
    before = tree(directory)
    target = board_path.parent / "pwned.txt"
    answer = json.dumps({"summary": "x", "files": {"../../pwned.txt": "x", str(target): "x"}})
    with FakeChatCompletionsServer(answer) as server:
        _openai_env(monkeypatch, server)
        run = run_agent(heal_task(directory, model_id, agent_backend="openai"), spec_check, board_path, print)
    assert run is not None and run.outcome == "rejected_outside" and "refused" in run.detail
    assert not target.exists() and tree(directory) == before


def test_openai_endpoint_that_hangs_times_out(
    board: BoardStore, board_path: Path, agent: AgentScript, monkeypatch: pytest.MonkeyPatch
) -> None:
    model_id, directory = make_adaptation(board, board_path.parent / "adaptations")
    with FakeChatCompletionsServer("{}", delay_s=10) as server:
        _openai_env(monkeypatch, server)
        start = time.monotonic()
        run = run_agent(
            heal_task(directory, model_id, agent_backend="openai", agent_timeout_s=1), spec_check, board_path, print
        )
        assert time.monotonic() - start < 8
    assert run is not None and run.outcome == "timeout"
