"""Refusals do not retry: the real discovery and adaptation stages under the team lead, with an
attempt budget of 3, end deterministic refusals on their first attempt with reason and remedy."""

from __future__ import annotations

import ast
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from ascendbridge.board import BoardStore, Registration
from ascendbridge.refusals import REFUSALS, UNLISTED_REMEDY, as_refusal, is_refusal, remedy
from healing.classifier import classify
from healing.failure import Failure
from tests.teamlead.tl_support import attempts, check_event_log, run_tl, statuses


def _model_dir(root: Path, name: str, config: object) -> str:
    directory = root / name
    directory.mkdir(parents=True)
    (directory / "config.json").write_text(config if isinstance(config, str) else json.dumps(config))
    return str(directory)


@pytest.mark.slow  # a real team-lead run over refused models
def test_refusals_end_on_the_first_attempt_with_reason_and_remedy(board: BoardStore, tmp_path: Path) -> None:
    models = tmp_path / "models"
    video = {
        "architectures": ["VideoMAEForVideoClassification"],
        "model_type": "videomae",
        "hidden_size": 32,
        "num_hidden_layers": 2,
        "num_attention_heads": 2,
        "intermediate_size": 64,
    }
    remote = {
        "architectures": ["ToyForCausalLM"],
        "model_type": "toy",
        "auto_map": {"AutoModelForCausalLM": "modeling_toy.ToyForCausalLM"},
    }
    board.register_models(
        [
            Registration(model_id="org/video", source="local", path=_model_dir(models, "video", video)),
            Registration(model_id="org/corrupt", source="local", path=_model_dir(models, "corrupt", "{not json")),
            Registration(model_id="org/remote", source="local", path=_model_dir(models, "remote", remote)),
        ]
    )
    run = run_tl(
        board.path, tmp_path, "--stages", "discovery,adaptation", "--attempts", "3", "--workers", "3", extra=""
    )
    assert run.returncode == 1, run.stderr[-3000:]  # refusals are failures / blocks of this run
    st = statuses(board)
    assert st[("org/video", "discovery")] == "completed" and st[("org/video", "adaptation")] == "failed"
    assert st[("org/corrupt", "discovery")] == "failed"
    assert st[("org/remote", "discovery")] == "blocked"
    for model_id, stage, rule in (
        ("org/video", "adaptation", "unknown_task_family"),
        ("org/corrupt", "discovery", "corrupt_config"),
        ("org/remote", "discovery", "remote_code_not_allowed"),
    ):
        tried = attempts(board, model_id, stage)
        assert len(tried) == 1 and tried[0].outcome in ("failed", "blocked"), (model_id, tried)
        task = next(t for t in board.list_tasks(model_id=model_id) if t.stage == stage)
        assert task.attempts == 1 and task.diagnosis["rule"] == rule
        assert task.diagnosis["retryable"] is False and task.diagnosis["remedy"], task.diagnosis
        events = [e.kind for e in board.list_events(model_id=model_id, limit=1000) if e.stage == stage]
        assert "retry" not in events and events.count("claimed") == 1, events
    video_diag = next(t for t in board.list_tasks(model_id="org/video") if t.stage == "adaptation").diagnosis
    assert "VideoMAEForVideoClassification" in video_diag["summary"]
    assert video_diag["remedy"].startswith("needs the video_classification task family")
    assert (
        "allow_remote_code"
        in next(t for t in board.list_tasks(model_id="org/remote") if t.stage == "discovery").diagnosis["remedy"]
    )
    assert "refusal, not retried" in run.stdout + run.stderr
    assert all(count <= 1 for count in check_event_log(board).values())


def test_only_failures_that_can_change_are_retried() -> None:
    assert not is_refusal({"rule": "hub_unreachable"}) and not is_refusal({"rule": "run_timeout"})
    assert not is_refusal({"rule": "gate_failed"}) and not is_refusal(None)
    assert is_refusal({"rule": "too_large"}) and is_refusal({"rule": "gated_no_token"})
    assert is_refusal({"rule": "anything", "retryable": False})
    assert not is_refusal({"rule": "unknown_task_family", "retryable": True})  # a stage may overrule the table
    assert "HF_TOKEN" in remedy({"rule": "gated_no_token"})
    assert remedy({"rule": "unknown_task_family", "architecture": "XForNothingKnown"}).startswith("a task family")


def test_the_runtimes_own_refusal_is_a_healing_refusal() -> None:
    result = {
        "ok": False,
        "error": "the forward of FooModel takes no input the runtime can build",
        "error_kind": "unsupported_model",
    }
    failure = Failure(phase="dry_run", exit_code=1, timed_out=False, output="error: ...\n", result=result)
    diagnosis = classify(failure).diagnosis()
    assert diagnosis["rule"] == "unsupported_model" and is_refusal(diagnosis)
    assert "task family" in remedy(diagnosis)


STAGE_PACKAGES = (
    "ascendbridge",
    "adaptation",
    "benchmark",
    "business_benchmark",
    "healing",
    "optimization",
    "quantization",
    "serving",
    "training",
)


def _refused_rules(path: Path) -> Iterator[tuple[str, bool]]:
    """(rule, has its own remedy) of every `failed(summary, "rule", retryable=False, ...)` in a file."""
    for node in ast.walk(ast.parse(path.read_text())):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "failed"):
            continue
        keywords = {k.arg: k.value for k in node.keywords}
        retryable = keywords.get("retryable")
        if isinstance(retryable, ast.Constant) and retryable.value is False and len(node.args) > 1:
            rule = node.args[1]
            assert isinstance(rule, ast.Constant), f"{path}:{node.lineno}: a refusal's rule is a literal"
            yield str(rule.value), "remedy" in keywords


def test_every_refusal_a_stage_gives_says_what_unlocks_it() -> None:
    """A stage that marks its own failure not retryable names its remedy there or in the table: the
    log line and the board never read `remedy: ` with nothing after it."""
    repo = Path(__file__).resolve().parents[2]
    found = {
        (str(path.relative_to(repo)), rule)
        for package in STAGE_PACKAGES
        for path in (repo / package).rglob("*.py")
        for rule, own in _refused_rules(path)
        if not own
    }
    assert found, "the scan found no stage refusal: it no longer reads the stages"
    missing = sorted((where, rule) for where, rule in found if rule not in REFUSALS)
    assert not missing, missing
    assert remedy({"rule": "no_such_rule", "retryable": False}) == UNLISTED_REMEDY


def test_a_training_corpus_it_cannot_read_is_refused_with_a_remedy() -> None:
    refusal = as_refusal(
        {"rule": "training_refused", "summary": "training refused: a JSON corpus is a list of records"}
    )
    assert refusal["retryable"] is False and "retry MODEL --stage training" in refusal["remedy"]
