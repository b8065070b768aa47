"""BoardStore semantics: registration, naming, stage transitions, steering, events, export."""

from __future__ import annotations

import json

import pytest

from ascendbridge.board import (
    AttemptEnd,
    AttemptStart,
    BoardError,
    BoardStore,
    InvalidRegistrationError,
    Registration,
    StaleTokenError,
    UnknownModelError,
)
from ascendbridge.board.records import TrainingJob
from ascendbridge.config import REPO_ROOT
from ascendbridge.naming import hashed_adaptation_name
from ascendbridge.stages import OPTIONAL_STAGES, STAGES, TRAINING_JOB_STAGES, UnknownNameError


def statuses(board: BoardStore, model_id: str) -> dict[str, str]:
    return {t.stage: t.status for t in board.list_tasks(model_id=model_id)}


# the stages a model without a training job runs unless a person enables an optional one
UNTRAINED = [s for s in STAGES if s not in TRAINING_JOB_STAGES | OPTIONAL_STAGES]


def event_kinds(board: BoardStore, model_id: str) -> list[str]:
    return [e.kind for e in board.list_events(model_id=model_id, limit=1000)]


def run_stage(board: BoardStore, model_id: str, stage: str) -> None:
    """Claim and complete one stage of one model, as a worker would."""
    task = board.claim_next(owner="test-worker", lease_s=60, stages=[stage])
    assert task is not None and task.model_id == model_id
    board.complete_task(task.id, task.fencing_token, {"ok": True})


def test_registration_creates_one_task_per_stage(board: BoardStore) -> None:
    [(record, created)] = board.register_models([Registration(model_id="org/Model-A")])
    assert created and record.adaptation_name == "org__model-a"
    assert record == board.get_model("org/Model-A")  # the returned record is what was stored
    assert statuses(board, "org/Model-A") == {
        "discovery": "pending",
        "adaptation": "waiting",
        "healing": "waiting",
        "training": "waiting",
        "benchmark": "waiting",
        "optimization": "waiting",
        "business_benchmark": "waiting",
        "quantization": "waiting",
        "serving": "waiting",
    }
    # every stage runs by default, business_benchmark included; training only with a training job,
    # an optional stage (quantization) only when enabled
    assert record.skip_stages == ["quantization", "training"]
    assert event_kinds(board, "org/Model-A") == ["registered"]


def test_an_opt_in_stage_enabled_at_registration_runs(board: BoardStore) -> None:
    """`enable_stages` (register_model --enable-stage) leaves an optional stage off the skip list:
    its task becomes pending in its turn instead of skipped 'opt-in, not enabled'."""
    [(record, _)] = board.register_models([Registration(model_id="org/q", enable_stages=sorted(OPTIONAL_STAGES))])
    assert record.skip_stages == ["training"]
    for stage in UNTRAINED:
        run_stage(board, "org/q", stage)
        if stage == "business_benchmark":
            assert all(statuses(board, "org/q")[s] == "pending" for s in OPTIONAL_STAGES)
            break


def test_registration_is_idempotent(board: BoardStore) -> None:
    board.register_models([Registration(model_id="gpt2", priority=5)])
    again = board.register_models([Registration(model_id="gpt2", priority=9), Registration(model_id="gpt2")])
    assert [created for _, created in again] == [False, False]
    assert len(board.list_models()) == 1
    assert board.get_model("gpt2").priority == 5  # the existing row is reported, not overwritten
    assert len(board.list_tasks(model_id="gpt2")) == len(STAGES)
    assert event_kinds(board, "gpt2") == ["registered"]


def test_name_collision_gets_a_stable_hashed_name(board: BoardStore) -> None:
    results = board.register_models([Registration(model_id="Org/Model"), Registration(model_id="org/model")])
    first, second = (r for r, _ in results)
    assert first.adaptation_name == "org__model"
    assert second.adaptation_name == hashed_adaptation_name("org/model")
    assert second.adaptation_name != first.adaptation_name
    assert hashed_adaptation_name("org/model") == hashed_adaptation_name("org/model")


@pytest.mark.parametrize(
    "reg, message",
    [
        (Registration(model_id=""), "empty"),
        (Registration(model_id="a" * 129), "at most 128"),
        (Registration(model_id="/etc/passwd"), "absolute"),
        (Registration(model_id="org/../x"), ".."),
        (Registration(model_id="x;rm -rf ~"), "characters outside"),
        (Registration(model_id="ok", source="ftp"), "unknown source"),
        (Registration(model_id="ok", source="local"), "needs --path"),
        (Registration(model_id="ok", revision="main; ls"), "revision"),
        (Registration(model_id="ok", url="javascript:alert(1)"), "url"),
        (Registration(model_id="ok", skip_stages=["nope"]), "unknown stage"),
        (Registration(model_id="ok", enable_stages=["nope"]), "unknown stage"),
        (Registration(model_id="ok", enable_stages=["serving"]), "serving always run"),
        (Registration(model_id="ok", priority=2**63), "out of range"),
    ],
)
def test_bad_registrations_are_refused_before_any_write(board: BoardStore, reg: Registration, message: str) -> None:
    with pytest.raises(InvalidRegistrationError, match=message):
        board.register_models([Registration(model_id="good-one"), reg])
    assert board.list_models() == []  # all or nothing
    assert board.list_events() == []


def test_completion_advances_and_policy_skips_a_stage(board: BoardStore) -> None:
    board.register_models([Registration(model_id="m", skip_stages=["serving"])])
    for stage in UNTRAINED[:-1]:
        run_stage(board, "m", stage)
    assert statuses(board, "m") == {s: "completed" for s in UNTRAINED[:-1]} | {
        "training": "skipped",
        "quantization": "skipped",
        "serving": "skipped",
    }
    kinds = event_kinds(board, "m")
    assert kinds.count("claimed") == 6 and kinds.count("completed") == 6 and kinds[-1] == "skipped"


def test_skip_before_predecessor_is_passed_over_later(board: BoardStore) -> None:
    board.register_models([Registration(model_id="m")])
    board.skip("m", "adaptation")
    assert statuses(board, "m")["adaptation"] == "skipped"
    run_stage(board, "m", "discovery")
    assert statuses(board, "m")["healing"] == "pending"


def test_skip_after_failure_moves_the_pipeline_on(board: BoardStore) -> None:
    board.register_models([Registration(model_id="m")])
    run_stage(board, "m", "discovery")
    task = board.claim_next("w", 60, stages=["adaptation"])
    board.fail_task(task.id, task.fencing_token, {"summary": "no rule"})
    board.skip("m", "adaptation")
    assert statuses(board, "m")["adaptation"] == "skipped"
    assert statuses(board, "m")["healing"] == "pending"
    (skipped,) = board.list_tasks("adaptation", model_id="m")  # the reason stays, the failure's with it
    assert skipped.diagnosis == {"rule": "skip_requested", "summary": "on request (it was failed: no rule)"}
    with pytest.raises(BoardError, match="completed"):
        board.skip("m", "discovery")


def test_retry_returns_failed_stage_to_pending(board: BoardStore) -> None:
    board.register_models([Registration(model_id="m")])
    task = board.claim_next("w", 60)
    board.fail_task(task.id, task.fencing_token, {"summary": "boom"})
    with pytest.raises(BoardError, match="only failed, blocked or skipped"):
        board.retry("m", "adaptation")
    retried = board.retry("m")
    assert retried.stage == "discovery" and retried.status == "pending" and retried.attempts == 0
    assert retried.diagnosis is None
    assert event_kinds(board, "m")[-2:] == ["failed", "retry"]
    with pytest.raises(BoardError, match="no failed or blocked stage"):
        board.retry("m")


def test_retry_after_model_left_pipeline_reopens_later_stages(board: BoardStore) -> None:
    board.register_models([Registration(model_id="m", skip_stages=["serving"])])
    task = board.claim_next("w", 60)
    board.fail_task(task.id, task.fencing_token, {"summary": "too large"}, status="skipped")
    assert set(statuses(board, "m").values()) == {"skipped"}
    board.retry("m", "discovery")
    assert statuses(board, "m")["discovery"] == "pending"
    assert statuses(board, "m")["adaptation"] == "waiting"
    for stage in UNTRAINED[:-1]:
        run_stage(board, "m", stage)
    assert statuses(board, "m")["serving"] == "skipped"  # policy still applies


def test_rollback_makes_stage_pending_and_later_stages_wait(board: BoardStore) -> None:
    board.register_models([Registration(model_id="m")])
    for stage in ("discovery", "adaptation", "healing"):
        run_stage(board, "m", stage)
    changed = board.rollback("m", "adaptation")
    assert [(t.stage, t.status) for t in changed] == [
        ("adaptation", "pending"),
        ("healing", "waiting"),
        ("training", "waiting"),
        ("benchmark", "waiting"),
        ("optimization", "waiting"),
        ("business_benchmark", "waiting"),
        ("quantization", "waiting"),
        ("serving", "waiting"),
    ]
    assert statuses(board, "m")["discovery"] == "completed"
    assert event_kinds(board, "m")[-8:] == ["rollback"] * 8
    run_stage(board, "m", "adaptation")
    assert statuses(board, "m")["healing"] == "pending"


def test_rollback_refused_while_in_progress_or_before_predecessor(board: BoardStore) -> None:
    board.register_models([Registration(model_id="m")])
    with pytest.raises(BoardError, match="predecessor is not done"):
        board.rollback("m", "healing")
    board.claim_next("w", 60)
    with pytest.raises(BoardError, match="in progress"):
        board.rollback("m", "discovery")


def test_unknown_models_and_names(board: BoardStore) -> None:
    for call in (
        lambda: board.get_model("nope"),
        lambda: board.retry("nope"),
        lambda: board.skip("nope", "healing"),
        lambda: board.rollback("nope", "discovery"),
        lambda: board.set_priority("nope", 1),
    ):
        with pytest.raises(UnknownModelError):
            call()
    with pytest.raises(UnknownNameError):
        board.list_tasks(stage="compile")
    with pytest.raises(UnknownNameError):
        board.list_tasks(status="done")


def test_every_steering_change_appends_an_event(board: BoardStore) -> None:
    board.register_models([Registration(model_id="m")])
    board.set_priority("m", 4)
    board.set_paused("m", True)
    board.set_paused("m", False)
    board.set_allow_remote_code("m", True)
    assert event_kinds(board, "m") == ["registered", "priority", "paused", "resumed", "policy"]
    model = board.get_model("m")
    assert (model.priority, model.paused, model.allow_remote_code) == (4, False, True)


def test_paused_models_are_not_claimed(board: BoardStore) -> None:
    board.register_models([Registration(model_id="a", priority=1), Registration(model_id="b")])
    board.set_paused("a", True)
    assert board.claim_next("w", 60).model_id == "b"
    assert board.claim_next("w", 60) is None


def test_guidance_lifecycle(board: BoardStore) -> None:
    board.register_models([Registration(model_id="m")])
    g = board.add_guidance("try bf16", model_id="m")
    board.add_guidance("everyone: prefer sdpa")
    assert [x.text for x in board.list_guidance(state="open")] == ["try bf16", "everyone: prefer sdpa"]
    board.reply_guidance(g.id, "applied", "switched to bf16")
    assert [x.model_id for x in board.list_guidance(state="open")] == [None]
    assert board.list_guidance(model_id="m")[0].reply == "switched to bf16"
    with pytest.raises(BoardError, match="empty"):
        board.add_guidance("   ")
    assert "guidance_reply" in event_kinds(board, "m")


def test_figures_reach_the_board_only_with_a_fenced_completion(board: BoardStore) -> None:
    board.register_models([Registration(model_id="m")])
    task = board.claim_next("w", 60)
    figures = [
        {
            "values": {"latency_ms": 12.5, "cosine": 0.9999},
            "device": "cpu",
            "dtype": "fp32",
            "units": {"latency_ms": "ms"},
        }
    ]
    with pytest.raises(BoardError, match="not a finite number"):  # the whole completion is refused
        board.complete_task(task.id, task.fencing_token, {}, figures=[{"values": {"latency_ms": float("nan")}}])
    with pytest.raises(StaleTokenError):
        board.complete_task(
            task.id, task.fencing_token + 1, {}, figures=figures, model_fields={"task_family": "causal_lm"}
        )
    assert board.list_metrics() == [] and board.get_model("m").task_family is None
    assert board.get_task(task.id).status == "in_progress"
    board.complete_task(
        task.id,
        task.fencing_token,
        {},
        figures=figures,
        model_fields={"task_family": "causal_lm"},
        model_metadata={"layers": 2},
    )
    metrics = {m.name: m for m in board.list_metrics(model_id="m", stage="discovery")}
    assert metrics["latency_ms"].value == 12.5 and metrics["latency_ms"].unit == "ms"
    assert (board.get_model("m").task_family, board.get_model("m").metadata) == ("causal_lm", {"layers": 2})
    data = board.export()
    assert [m["model_id"] for m in data["models"]] == ["m"]
    assert len(data["tasks"]) == len(STAGES)
    assert {x["name"] for x in data["metrics"]} == {"latency_ms", "cosine"}
    assert data["last_event_id"] == data["events"][-1]["id"]


def test_export_carries_the_hosts_devices_and_where_each_attempt_ran(board: BoardStore) -> None:
    board.register_models([Registration(model_id="m")])
    task = board.claim_next("w", 60)
    placed = {
        "host": "h1",
        "devices": ["npu:6", "npu:7"],
        "cpus": [],
        "exclusive": True,
        "env": {"ASCEND_RT_VISIBLE_DEVICES": "6,7"},
    }
    attempt = board.start_attempt(task.id, task.fencing_token, AttemptStart("cmd", "/log", placement=placed))
    board.finish_attempt(attempt, AttemptEnd("completed", 0, 1.0))
    board.record_host_devices(
        "h1", [{"kind": "npu", "index": i, "name": "910B3", "memory_gb": 64.0} for i in (6, 7)], "torch_npu"
    )
    board.record_host_devices("h2", [{"kind": "cpu", "index": 0, "name": "4 cores", "cpus": [0, 1, 2, 3]}], "affinity")
    data = json.loads(json.dumps(board.export()))  # what `board_ops.py export` writes
    assert [
        (d["host"], d["kind"], d["index"], d["memory_gb"], d["cpus"], d["source"]) for d in data["host_devices"]
    ] == [
        ("h1", "npu", 6, 64.0, [], "torch_npu"),
        ("h1", "npu", 7, 64.0, [], "torch_npu"),
        ("h2", "cpu", 0, None, [0, 1, 2, 3], "affinity"),
    ]
    assert [(a["stage"], a["host"], a["devices"]) for a in data["attempts"]["m"]] == [
        ("discovery", "h1", "npu:6 npu:7")
    ]


def test_an_id_listed_twice_in_one_batch_is_registered_once(board: BoardStore) -> None:
    results = board.register_models(
        [Registration(model_id="gpt2"), Registration(model_id="bert"), Registration(model_id="gpt2")]
    )
    assert [(r.model_id, created) for r, created in results] == [("gpt2", True), ("bert", True), ("gpt2", False)]
    assert len(board.list_models()) == 2


def test_stage_statuses_matches_task_records(board: BoardStore) -> None:
    board.register_models([Registration(model_id="a"), Registration(model_id="b")])
    run_stage(board, "a", "discovery")
    expected: dict[str, dict[str, str]] = {}
    for task in board.list_tasks():
        expected.setdefault(task.model_id, {})[task.stage] = task.status
    assert board.stage_statuses() == expected
    assert list(board.stage_statuses()["a"]) == list(STAGES)  # pipeline order


def test_export_is_one_snapshot_while_another_process_writes(board: BoardStore) -> None:
    """export() reads in one transaction: its events end exactly at its last_event_id even while
    another process commits events between its queries."""
    import subprocess
    import sys

    board.register_models([Registration(model_id=f"org/s{i}") for i in range(30)])
    writer = subprocess.Popen(
        [
            sys.executable,
            "-c",
            (
                "import sys, time\nfrom ascendbridge.board import BoardStore, NewEvent\nstore = BoardStore(sys.argv[1])\n"
                "end = time.time() + 8\nwhile time.time() < end:\n    store.add_event(NewEvent('note', 'busy writer'))\n"
            ),
            str(board.path),
        ]
    )
    try:
        for _ in range(15):
            data = board.export()
            assert max(e["id"] for e in data["events"]) == data["last_event_id"]
    finally:
        writer.kill()
        writer.wait()


def test_ready_tasks_offer_each_stage_its_most_urgent_pending_tasks(board: BoardStore) -> None:
    """What the team lead's selection reads: pending tasks of unpaused models, a bounded list per stage."""
    board.register_models(
        Registration(
            model_id=f"org/m{i}",
            source="local",
            path="/x",
            priority=i % 3,
            training=TrainingJob(data=str(REPO_ROOT / "training/corpus/tiny_stories.jsonl"), processes=2)
            if i == 1
            else None,
        )
        for i in range(6)
    )
    first = board.claim_task(board.list_tasks("discovery", model_id="org/m0")[0].id, "w", 60)
    board.complete_task(first.id, first.fencing_token, {})  # org/m0 now waits in adaptation
    board.set_paused("org/m5", True)
    decision = {"decision": {"plan": {"devices": 3, "tensor_parallel_degree": 4}}, "config": {"num_hidden_layers": 28}}
    board.update_model_metadata("org/m2", {"parameter_count": 596_049_920}, decision)
    pk = {m.model_id: m.pk for m in board.list_models()}
    ready = board.ready_tasks(["discovery", "adaptation"], 2)
    assert [(t.stage, t.model_pk, t.priority) for t in ready] == [
        ("adaptation", pk["org/m0"], 0),
        ("discovery", pk["org/m2"], 2),
        ("discovery", pk["org/m1"], 1),
    ]
    assert (ready[1].plan_devices, ready[1].plan_tensor_parallel) == (3, 4) and ready[2].plan_devices is None
    assert (ready[1].train_processes, ready[2].train_processes) == (None, 2)  # org/m1's training job: 2 processes
    assert ready[1].task_id == board.list_tasks("discovery", model_id="org/m2")[0].id
    # What the scheduler ranks models by: their family (unknown before discovery) and skipped stages.
    assert (ready[1].task_family, ready[1].skip_stages) == (None, ("quantization", "training"))
    assert ready[2].skip_stages == ("quantization",)  # org/m1 has a training job; quantization is opt-in
    # ... and their size: discovery's count, with what a registered proxy's size is computed from.
    assert (ready[1].parameter_count, ready[1].proxy_depth, ready[1].config) == (
        596_049_920,
        None,
        {"num_hidden_layers": 28},
    )
    assert (ready[2].parameter_count, ready[2].config) == (None, None)
    assert pk["org/m5"] not in {t.model_pk for t in board.ready_tasks(["discovery"], 10)}  # paused
    assert board.ready_tasks(["benchmark"], 5) == [] and board.ready_tasks([], 5) == []
