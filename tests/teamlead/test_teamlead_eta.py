"""The ETA: every task costed (a measured median, or a prior shown as such), laid out the way the
team lead runs work (timed lane beside untimed lanes), recomputed as running tasks age; the host's
stage history; the bench that replays a finished board."""

from __future__ import annotations

import json
import logging
import math
import time
from collections.abc import Sequence
from datetime import datetime, timedelta, timezone
from pathlib import Path
from types import SimpleNamespace

import pytest
from rich.console import Console

from ab_runtime.progress import fmt_s
from ascendbridge.board import AttemptEnd, AttemptStart, BoardStore, ModelRecord, Registration, TaskRecord
from ascendbridge.board.records import TrainingJob
from ascendbridge.config import REPO_ROOT
from ascendbridge.stage_registry import StageRef
from ascendbridge.stages import OPTIONAL_STAGES, STAGES
from ascendbridge.teamlead.eta import COSTS_FILE, PRIORS, CostModel, Eta, Lanes, Sample, estimate
from ascendbridge.teamlead.history import HistoryError, HostHistory
from ascendbridge.teamlead.progress import Progress, overall
from ascendbridge.teamlead.scheduler import RunStats
from ascendbridge.teamlead.settings import TeamLeadSettings
from ascendbridge.workers.devices import detect
from ascendbridge.workers.placement import DevicePool
from bench import eta_error
from tests.support.fake_devices import FAKE_NPU_SMI_8X64, FAKE_NVIDIA_SMI_2X, fake_runner

NOW = datetime(2026, 12, 1, 7, 0, 0, tzinfo=timezone.utc)
COSTS = CostModel(
    {
        "discovery": {"*": 10.0},
        "healing": {"*": 50.0, "seq2seq": 100.0},
        "benchmark": {"*": 50.0},
        "optimization": {"*": 200.0},
    }
)


def task(stage: str, status: str, n: int = 1, started_s_ago: float | None = None) -> TaskRecord:
    started = (NOW - timedelta(seconds=started_s_ago)).isoformat() if started_s_ago is not None else None
    return TaskRecord(
        id=n * 10 + STAGES.index(stage),
        model_pk=n,
        model_id=f"m{n}",
        adaptation_name=f"m{n}",
        priority=0,
        stage=stage,
        status=status,
        attempts=1,
        fencing_token=1,
        started_at=started,
        updated_at=NOW.isoformat(),
    )


def model(n: int, family: str | None = None) -> ModelRecord:
    return ModelRecord(
        pk=n,
        model_id=f"m{n}",
        source="local",
        description="",
        adaptation_name=f"m{n}",
        priority=0,
        allow_remote_code=False,
        paused=False,
        env_mode="locked",
        task_family=family,
        created_at=NOW.isoformat(),
    )


def run(
    tasks: list[TaskRecord],
    stages: list[str],
    board: Sequence[Sample] = (),
    host: Sequence[Sample] = (),
    lanes: Lanes = Lanes(2, 1),
    families: dict[int, str] | None = None,
) -> Eta:
    """The ETA of `tasks` (model n's family: families[n]) against COSTS, at NOW."""
    models = [model(n, (families or {}).get(n)) for n in sorted({t.model_pk for t in tasks})]
    return estimate(tasks, models, stages, list(board), list(host), COSTS, lanes, NOW)


def test_a_stage_with_no_completed_attempt_costs_its_prior_and_says_so() -> None:
    """Today's bug: benchmark had no completed attempt and counted as zero (`ETA >=1m19s`)."""
    tasks = [task("healing", "pending", 1), task("benchmark", "waiting", 1)]
    board = [Sample("healing", None, 100.0)] * 2  # healing runs x2 here
    eta = run(tasks, ["healing", "benchmark"], board=board)
    assert eta.seconds == pytest.approx(100.0 + 100.0)  # healing measured; benchmark's prior 50 s scaled x2
    assert eta.text().startswith(
        "ETA 3m20s [healing 1m40s x1 (median of 2 here and its prior), "
        "benchmark ~1m40s x1 (prior: cost model x2.00, as other stages ran here)"
    )
    fresh = run(tasks, ["healing", "benchmark"])  # nothing measured on this board yet
    assert fresh.seconds == 50.0 + 50.0 and "benchmark ~50s x1 (prior: cost model)" in fresh.text()
    assert ">=" not in eta.text() + fresh.text()


def test_a_prior_is_scaled_by_the_stages_of_its_own_kind_that_ran_here() -> None:
    """Beside busy loops a timed stage (own pinned core, compilation) slowed x7 where the untimed ones
    slowed x2.4: scaling optimization by the untimed stages under-priced it. Timed by timed when one
    has run; by whatever ran when none has."""
    tasks = [task("optimization", "waiting", 1)]
    untimed = [Sample("discovery", None, 20.0), Sample("healing", None, 100.0)]  # x2 here
    before_any_timed = run(tasks, ["optimization"], board=untimed)
    assert before_any_timed.seconds == pytest.approx(400.0)  # 200 s x2
    timed_too = run(tasks, ["optimization"], board=[*untimed, Sample("benchmark", None, 300.0)])  # x6
    assert timed_too.seconds == pytest.approx(1200.0)  # 200 s x6: the benchmark's pace, not healing's
    assert "optimization ~20m00s x1 (prior: cost model x6.00, as other stages ran here)" in timed_too.text()
    untimed_left = run(
        [task("healing", "pending", 2)], ["healing"], board=[*untimed[:1], Sample("benchmark", None, 300.0)]
    )
    assert untimed_left.seconds == pytest.approx(100.0)  # healing by discovery's x2, not the benchmark's x6


def test_priors_are_per_family_and_host_history_comes_before_the_cost_model() -> None:
    tasks = [task("healing", "pending", 1), task("healing", "pending", 2)]
    shipped = run(tasks, ["healing"], families={1: "seq2seq", 2: "causal_lm"}, lanes=Lanes(1, 1))
    assert shipped.seconds == 100.0 + 50.0  # seq2seq's own figure, the stage's '*' for a family it lacks
    host = [Sample("healing", "seq2seq", 300.0), Sample("healing", "seq2seq", 300.0)]  # this host: x3
    hosted = run(tasks, ["healing"], host=host, families={1: "seq2seq", 2: "causal_lm"}, lanes=Lanes(1, 1))
    assert hosted.seconds == pytest.approx(300.0 + 150.0)
    assert "healing ~3m45s x2 (prior: 2 attempt(s) on earlier boards of this host)" in hosted.text()
    here = run(
        tasks,
        ["healing"],
        board=[Sample("healing", "causal_lm", 25.0)],
        host=host,
        families={1: "seq2seq", 2: "causal_lm"},
        lanes=Lanes(1, 1),
    )
    # One attempt here (x0.5) and the host's prior (x3) meet half-way in log space; a second agreeing
    # attempt decides it: this board wins.
    assert (
        here.seconds == pytest.approx(150.0 * math.sqrt(0.5 * 3)) and "(median of 1 here and its prior)" in here.text()
    )
    twice = [Sample("healing", "causal_lm", 25.0)] * 2
    here = run(tasks, ["healing"], board=twice, host=host, families={1: "seq2seq", 2: "causal_lm"}, lanes=Lanes(1, 1))
    assert here.seconds == pytest.approx(50.0 + 25.0) and "(median of 2 here and its prior)" in here.text()


def test_an_attempt_of_no_measurable_time_is_a_ratio_of_zero_not_a_crash() -> None:
    """A stage skipped at once records 0 s; beside its prior (x1) it meets at their geometric mean, 0."""
    tasks = [task("healing", "pending", 1)]
    eta = run(tasks, ["healing"], board=[Sample("healing", None, 0.0)])
    assert eta.seconds == 0.0 and "(median of 1 here and its prior)" in eta.text()
    three = run(tasks, ["healing"], board=[Sample("healing", None, 0.0), Sample("healing", None, 100.0)])
    assert three.seconds == pytest.approx(50.0)  # the median of 0, x1 (the prior) and x2


def test_a_stage_the_cost_model_lacks_costs_its_stage_toml_prior() -> None:
    """The main job's `ETA unknown (no estimate for quantization; ...)`: a stage new to the cost
    model has its stage.toml `cost_s`, scaled like any prior and named as such."""
    tasks = [task("discovery", "pending", 1), task("business_benchmark", "pending", 2)]
    eta = run(tasks, ["discovery", "business_benchmark"])  # COSTS has no business_benchmark
    assert eta.seconds == PRIORS["business_benchmark"]
    assert f"business_benchmark ~{fmt_s(PRIORS['business_benchmark'])} x1 (prior: stage.toml cost_s)" in eta.text()


def test_no_sample_and_no_prior_is_unknown_never_a_lower_bound_shown_as_the_eta(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delitem(PRIORS, "business_benchmark")  # a stage with no figure anywhere
    tasks = [task("discovery", "pending", 1), task("business_benchmark", "pending", 2)]
    eta = run(tasks, ["discovery", "business_benchmark"])  # COSTS has no business_benchmark
    assert eta.seconds is None and eta.known_s == 10.0
    assert eta.text() == (
        "ETA unknown: no sample or prior for business_benchmark (the rest alone: 10s) "
        "[discovery ~10s x1 (prior: cost model), business_benchmark ? x1 (no sample, no prior)]"
    )
    assert eta.short() == "ETA unknown (no estimate for business_benchmark; the rest: 10s)"  # the progress line's
    measured = run(tasks, ["discovery", "business_benchmark"], board=[Sample("business_benchmark", None, 30.0)])
    assert measured.seconds == 30.0  # beside discovery (the other worker); its median (no prior to meet)
    assert run([task("discovery", "completed")], ["discovery"]).text() == "ETA 0s"
    assert measured.short() == "ETA 30s" and run([task("discovery", "completed")], ["discovery"]).short() == "ETA 0s"


def test_timed_work_runs_on_its_slot_beside_untimed_work_the_eta_is_the_longer_lane() -> None:
    """4 models, healing then benchmark, 50 s each; 2 workers, 1 timed slot: the benchmarks queue on
    the slot from t=50 while the healings finish on the other worker: 50 + 4 x 50 = 250 s, where the
    sum of the stages over their widths (the old ETA) said 4 x 50 / 2 + 4 x 50 = 300 s."""
    tasks = [t for n in range(1, 5) for t in (task("healing", "pending", n), task("benchmark", "waiting", n))]
    eta = run(tasks, ["healing", "benchmark"], board=[Sample("healing", None, 50.0), Sample("benchmark", None, 50.0)])
    assert eta.seconds == 250.0 and (eta.timed_s, eta.untimed_s) == (200.0, 200.0)
    assert run(tasks, ["healing", "benchmark"], lanes=Lanes(1, 1)).seconds == 400.0  # one worker: the sum
    capped = run(tasks, ["healing", "benchmark"], lanes=Lanes(4, 4, {"benchmark": 1}))
    assert capped.seconds == 50.0 + 4 * 50.0  # the stage's own cap holds the benchmarks to one at a time
    # A model's tasks after a failed stage never run in this run: not counted.
    stuck = [task("healing", "failed", 1), task("benchmark", "waiting", 1), task("healing", "pending", 2)]
    assert run(stuck, ["healing", "benchmark"]).seconds == 50.0
    paused = estimate(
        tasks,
        [model(1).model_copy(update={"paused": True}), *(model(n) for n in range(2, 5))],
        ["healing", "benchmark"],
        [],
        [],
        COSTS,
        Lanes(2, 1),
        NOW,
    )
    assert paused.seconds == 50.0 + 3 * 50.0  # a paused model is never claimed


def test_the_eta_lays_models_out_in_the_schedulers_order_the_longest_first() -> None:
    """Two timed slots; m1 and m2 a benchmark each (50 s), m3 registered last with a benchmark and an
    optimization (200 s): served first, as the scheduler serves it, the run ends at 50 + 200 s,
    not at 100 + 200 s as registration order would lay it out."""
    tasks = [task("benchmark", "pending", 1), task("benchmark", "pending", 2), task("benchmark", "pending", 3)]
    tasks.append(task("optimization", "waiting", 3))
    short = {"skip_stages": ["optimization"]}
    models = [model(1, "causal_lm").model_copy(update=short), model(2, "causal_lm").model_copy(update=short)]
    models.append(model(3, "causal_lm"))
    eta = estimate(tasks, models, ["benchmark", "optimization"], [], [], COSTS, Lanes(2, 2), NOW)
    assert eta.seconds == 50.0 + 200.0
    # discovery, healing, benchmark; the stages this cost model never measured cost their stage.toml prior
    unmeasured = sum(PRIORS[s] for s in STAGES if s not in COSTS.stages)
    assert COSTS.model_work_s("causal_lm", ["optimization"]) == 10.0 + 50.0 + 50.0 + unmeasured
    assert COSTS.base("serving", "causal_lm") == PRIORS["serving"] and COSTS.base("healing", "seq2seq") == 100.0
    assert COSTS.model_work_s(None, []) == math.inf  # undiscovered: discovered first, its family tells its cost


def test_a_larger_model_of_the_same_family_is_laid_out_first() -> None:
    """Two timed slots, a benchmark each: m1 and m2 tiny (50 s), m3 registered last but 0.2 B
    parameters (its size term adds 200 s): served first, as the scheduler serves it (its work is the
    longest once its size counts), the run ends at 250 s, not at 50 + 250 s as registration order
    (equal work without the size) would lay it out."""
    sized = CostModel(COSTS.stages, size_s={"benchmark": 1000.0})
    assert sized.model_work_s("causal_lm", ["optimization"], 200_000_000) == (
        sized.model_work_s("causal_lm", ["optimization"]) + 200.0
    )
    tasks = [task("benchmark", "pending", n) for n in (1, 2, 3)]
    short = {"skip_stages": ["optimization"]}
    models = [model(n, "causal_lm").model_copy(update={**short, "parameter_count": 100_000}) for n in (1, 2)]
    models.append(model(3, "causal_lm").model_copy(update={**short, "parameter_count": 200_000_000}))
    eta = estimate(tasks, models, ["benchmark"], [], [], sized, Lanes(2, 2), NOW)
    assert eta.seconds == 250.0


def test_the_eta_counts_down_while_a_task_runs() -> None:
    board = [Sample("healing", None, 60.0)] * 2
    fresh = run([task("healing", "in_progress", 1, started_s_ago=10)], ["healing"], board=board)
    later = run([task("healing", "in_progress", 1, started_s_ago=40)], ["healing"], board=board)
    overdue = run([task("healing", "in_progress", 1, started_s_ago=90)], ["healing"], board=board)
    assert (fresh.seconds, later.seconds, overdue.seconds) == pytest.approx((50.0, 20.0, 0.0))  # not frozen


def test_timed_slots_come_from_the_pool_not_the_workers(tmp_path: Path) -> None:
    """8 workers, 4 models: discovery runs 4 at a time everywhere, benchmark as many as there are
    devices (8 NPUs, 2 GPUs) or timed core slots (one on a 2-core CPU host, plus the preparation
    core lent once discovery is done; without lending, one at a time)."""
    store = BoardStore.init(tmp_path / "board.db")
    store.register_models([Registration(model_id=f"m{i}", skip_stages=["adaptation", "healing"]) for i in range(4)])
    board = [Sample("discovery", None, 10.0), Sample("benchmark", None, 100.0)] * 2
    settings = TeamLeadSettings(stages=("discovery", "benchmark"), workers=8)
    seen = {}
    for label, inventory in (
        ("npu", detect(None, fake_runner(npu=FAKE_NPU_SMI_8X64), cpus=(0, 1), host="h")),
        ("cuda", detect(None, fake_runner(nvidia=FAKE_NVIDIA_SMI_2X), cpus=(0, 1), host="h")),
        ("cpu", detect(None, fake_runner(), cpus=(0, 1), host="h")),
        ("cpu-unlent", detect(None, fake_runner(), cpus=(0, 1), host="h")),
    ):
        pool = DevicePool(inventory, lend=label != "cpu-unlent")
        lead = SimpleNamespace(store=store, settings=settings, pool=pool, stats=RunStats())
        _, total, eta = overall(lead, board, [], COSTS)  # type: ignore[arg-type]  # the parts overall() reads
        seen[label] = (total, eta.seconds)
    store.close()
    assert seen == {
        "npu": (8, pytest.approx(10 + 100)),
        "cuda": (8, pytest.approx(10 + 2 * 100)),
        "cpu": (8, pytest.approx(10 + 2 * 100)),
        "cpu-unlent": (8, pytest.approx(10 + 4 * 100)),
    }


def test_a_fault_in_the_estimate_is_one_warning_and_the_line_says_eta_unavailable(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The ETA is advisory: a bug in it (CI once met `math.log(0)` there) must not stop the team lead."""
    store = BoardStore.init(tmp_path / "board.db")
    store.register_models([Registration(model_id="m0")])
    pool = DevicePool(detect(None, fake_runner(), cpus=(0, 1), host="h"))
    lead = SimpleNamespace(store=store, settings=TeamLeadSettings(stages=("discovery",)), pool=pool, stats=RunStats())
    lead.jobs = {}

    def broken(*args: object) -> Eta:
        raise ZeroDivisionError("float division by zero")

    monkeypatch.setattr("ascendbridge.teamlead.progress.estimate", broken)
    progress = Progress(Console(), logging.getLogger("test-eta"), False, lambda: [], costs=COSTS)
    with caplog.at_level(logging.WARNING, logger="test-eta"):
        lines = [progress.summary_line(lead) for _ in range(3)]  # type: ignore[arg-type]  # what the line reads
    store.close()
    assert (
        lines
        == [
            "progress: 0/1 stage tasks done (0%), 0 running, ETA unavailable "
            "(ZeroDivisionError: float division by zero)"
        ]
        * 3
    )
    (warning,) = [r.getMessage() for r in caplog.records]  # once, not on every line
    assert (
        warning == "ETA: the estimate failed (ZeroDivisionError: float division by zero); the run goes on without one"
    )


def test_the_shipped_cost_model_covers_every_stage_and_says_where_it_came_from() -> None:
    costs = CostModel.load()
    # every stage that runs by default has measured costs; an opt-in stage may rely on its stage.toml prior
    assert set(costs.stages) <= set(STAGES) and set(STAGES) - set(costs.stages) <= OPTIONAL_STAGES
    assert all("*" in per for per in costs.stages.values())
    assert {"board", "how", "first_attempt", "last_attempt"} <= set(costs.source)
    assert costs.base("optimization", "causal_lm") != costs.base("optimization", "image_classification")
    assert costs.base("optimization", "no_such_family") == costs.stages["optimization"]["*"]
    assert json.loads(COSTS_FILE.read_text())["stages"] == costs.stages


# ---------------------------------------------------------------- the host's stage history
def test_history_gives_earlier_boards_of_this_host_never_this_boards_own(tmp_path: Path) -> None:
    path = tmp_path / "cache" / "stage_history.json"
    HostHistory(path, tmp_path / "a.db", "h1").record(
        [Sample("benchmark", "causal_lm", 60.0), Sample("healing", None, 50.0)]
    )
    HostHistory(path, tmp_path / "other-host.db", "h2").record([Sample("benchmark", None, 999.0)])
    assert HostHistory(path, tmp_path / "b.db", "h1").priors() == [
        Sample("benchmark", "causal_lm", 60.0),
        Sample("healing", None, 50.0),
    ]
    assert HostHistory(path, tmp_path / "a.db", "h1").priors() == []  # its own attempts are no prior
    HostHistory(path, tmp_path / "a.db", "h1").record([Sample("benchmark", "causal_lm", 70.0)])  # replaced, not added
    assert HostHistory(path, tmp_path / "b.db", "h1").priors() == [Sample("benchmark", "causal_lm", 70.0)]


@pytest.mark.parametrize(
    "content",
    [
        "{not json",
        json.dumps([1, 2]),
        json.dumps({"version": 99, "boards": {}}),
        json.dumps({"version": 1, "boards": {"/x.db": {"host": "h1", "samples": {"benchmark": {"": [-5]}}}}}),
        json.dumps({"version": 1, "boards": {"/x.db": {"host": "h1", "samples": {"benchmark": {"": ["NaN"]}}}}}),
        "\udcff",
    ],
)
def test_a_corrupted_history_is_ignored_with_a_warning_and_rewritten(
    tmp_path: Path, content: str, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "stage_history.json"
    path.write_bytes(content.encode("utf-8", "surrogateescape"))
    history = HostHistory(path, tmp_path / "board.db", "h1")
    with pytest.raises(HistoryError):
        history.priors()
    log = logging.getLogger("test-eta")
    progress = Progress(Console(), log, False, lambda: [], history)
    with caplog.at_level(logging.WARNING, logger="test-eta"):
        assert progress.host_priors() == [] and progress.host_priors() == []
    (warning,) = [r.getMessage() for r in caplog.records]  # once, not on every line
    assert warning.startswith(f"ETA: stage history {path}")
    assert warning.endswith("; ignored (the next finished attempt rewrites it)")
    history.record([Sample("discovery", None, 9.0)])
    assert HostHistory(path, tmp_path / "other.db", "h1").priors() == [Sample("discovery", None, 9.0)]


def test_a_history_that_cannot_be_written_is_one_warning_and_the_run_goes_on(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    (tmp_path / "a-file").write_text("")
    path = tmp_path / "a-file" / "stage_history.json"  # its directory cannot be made
    refs = {"discovery": StageRef("discovery", "discovery.stage:DISCOVERY_STAGE", "entry-point")}
    rows: list[tuple[str, str | None, float, int | None]] = [("discovery", None, 9.0, None)]
    progress = Progress(
        Console(), logging.getLogger("test-eta"), False, lambda: rows, HostHistory(path, tmp_path / "board.db", "h1")
    )
    stats = RunStats()
    with caplog.at_level(logging.WARNING, logger="test-eta"):
        for n in (1, 2):
            stats.outcomes["completed"] = n
            progress.refresh(SimpleNamespace(stats=stats, refs=refs))  # type: ignore[arg-type]
    (warning,) = [r.getMessage() for r in caplog.records]
    assert warning.startswith(f"ETA: cannot write the stage history {path}: ")
    assert progress.samples == [Sample("discovery", None, 9.0)]  # the ETA still has the board's attempts


def test_the_team_lead_records_only_the_products_own_stages(tmp_path: Path) -> None:
    """A stand-in registered under a stage's name (a test's toy stage, a plugin) must not teach the
    host what that stage costs."""
    path = tmp_path / "stage_history.json"
    rows: list[tuple[str, str | None, float, int | None]] = [
        ("discovery", "causal_lm", 9.0, 596_000_000),  # the model's size travels to later boards
        ("healing", "causal_lm", 0.1, None),
    ]
    refs = {
        "discovery": StageRef("discovery", "discovery.stage:DISCOVERY_STAGE", "entry-point"),
        "healing": StageRef("healing", "tests.teamlead.toy_stages:HEALING", "env"),
    }
    progress = Progress(
        Console(), logging.getLogger("test-eta"), False, lambda: rows, HostHistory(path, tmp_path / "board.db", "h1")
    )
    stats = RunStats()
    stats.outcomes["completed"] = 2
    progress.refresh(SimpleNamespace(stats=stats, refs=refs))  # type: ignore[arg-type]  # what refresh() reads
    assert HostHistory(path, tmp_path / "next.db", "h1").priors() == [
        Sample("discovery", "causal_lm", 9.0, 596_000_000)
    ]
    toys = Progress(
        Console(), logging.getLogger("test-eta"), False, lambda: rows[1:], HostHistory(path, tmp_path / "toys.db", "h1")
    )
    toys.refresh(SimpleNamespace(stats=stats, refs=refs))  # type: ignore[arg-type]
    assert str((tmp_path / "toys.db").resolve()) not in json.loads(path.read_text())["boards"]  # no empty entry


# ---------------------------------------------------------------- the bench
STAGE_S = {
    "discovery": 0.2,
    "adaptation": 0.2,
    "healing": 0.3,
    "training": 0.3,
    "benchmark": 0.3,
    "optimization": 0.4,
    "serving": 0.3,
    "business_benchmark": 0.2,
}


def _finished_board(path: Path, models: int) -> None:
    """A real board run one task at a time, each attempt really taking STAGE_S[stage] seconds."""
    store = BoardStore.init(path)
    job = TrainingJob(data=str(REPO_ROOT / "training" / "corpus" / "tiny_stories.jsonl"))  # every stage runs
    store.register_models([Registration(model_id=f"org/m{i}", training=job) for i in range(models)])
    for i in range(models):
        for stage in (s for s in STAGES if s not in OPTIONAL_STAGES):  # an optional stage is skipped by policy
            (row,) = store.list_tasks(stage=stage, model_id=f"org/m{i}")
            claimed = store.claim_task(row.id, "bench-test", 60)
            attempt = store.start_attempt(
                claimed.id, claimed.fencing_token, AttemptStart("run", str(path.parent / "log"))
            )
            start = time.monotonic()
            time.sleep(STAGE_S[stage])
            store.complete_task(claimed.id, claimed.fencing_token, {"summary": "ok"})
            store.finish_attempt(attempt, AttemptEnd("completed", 0, time.monotonic() - start))
    store.close()


def test_the_bench_replays_a_finished_board_knowing_only_what_was_known_then(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    board = tmp_path / "board.db"
    _finished_board(board, 2)
    good, bad = tmp_path / "good.json", tmp_path / "bad.json"
    good.write_text(json.dumps({"stages": {st: {"*": s} for st, s in STAGE_S.items()}}))
    bad.write_text(
        json.dumps({"stages": {st: {"*": s * (4 if st == "optimization" else 1)} for st, s in STAGE_S.items()}})
    )
    argv = [str(board), "--workers", "1", "--timed-slots", "1", "--json"]
    assert eta_error.main([*argv, "--costs", str(good)]) == 0
    rows = json.loads(capsys.readouterr().out)["rows"]
    tasks = 2 * len(STAGES)  # the first task count at or past each quarter
    assert [(r["finished"], r["tasks"]) for r in rows] == [(math.ceil(tasks * q / 4), tasks) for q in (1, 2, 3)]
    replay = eta_error.load(board)
    with BoardStore(board, read_only=True) as store:  # what the team lead's ETA reads: the same attempts
        assert [Sample(*row) for row in store.costed_attempts()] == replay.samples()
    end = max(replay.finished.values())
    for r in rows:
        assert r["true_s"] == pytest.approx((end - datetime.fromisoformat(r["moment"])).total_seconds())
        assert abs(r["error_pct"]) < 30, r
    # An optimization prior 4x too high: at 25 % (the first model up to its benchmark done) no
    # optimization had completed, so the ETA rests on it; at 50 % the first model's had, and its
    # measured duration and the prior meet half-way (in log space): the error shrinks from there.
    assert eta_error.main([*argv, "--costs", str(bad), "--max-error", "30"]) == 1
    rows = json.loads(capsys.readouterr().out)["rows"]
    assert rows[0]["error_pct"] > 30, rows[0]
    assert abs(rows[1]["error_pct"]) < rows[0]["error_pct"] and abs(rows[2]["error_pct"]) < rows[0]["error_pct"], rows
    assert "optimization ~" in rows[0]["eta_line"] and "(prior: cost model" in rows[0]["eta_line"]
    assert "(median of 1 here and its prior;" in rows[1]["eta_line"].split("optimization ", 1)[1]  # then its size note
    assert eta_error.main([str(board), "--costs", str(good)]) == 0  # the table
    out = capsys.readouterr().out
    quarter, three = math.ceil(tasks / 4), math.ceil(tasks * 3 / 4)
    assert f"25% ({quarter}/{tasks})" in out and f"75% ({three}/{tasks})" in out and "in-sample" not in out


def test_a_stage_that_skips_a_family_costs_what_the_skip_took_and_a_failure_or_recheck_costs_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Serving refusing a family at run time is an attempt that took seconds: that is what the stage
    costs a model of that family (the ETA and the shipped cost model learn it). A failed attempt or a
    gate re-check is not what the stage costs. The team lead and the bench read the same attempts."""
    board = tmp_path / "board.db"
    store = BoardStore.init(board)
    job = TrainingJob(data=str(REPO_ROOT / "training" / "corpus" / "tiny_stories.jsonl"))  # every stage runs
    families = {"org/served": "causal_lm", "org/refused": "seq2seq"}
    store.register_models([Registration(model_id=m, training=job) for m in families])

    def attempt(model_id: str, stage: str, seconds: float, outcome: str, recheck: int = 0) -> None:
        (task,) = store.list_tasks(stage=stage, model_id=model_id)
        if not recheck:
            task = store.claim_task(task.id, "test", 60)
        attempt_id = store.start_attempt(task.id, task.fencing_token, AttemptStart("run", "log", recheck=recheck))
        if outcome == "completed":
            fields = {"task_family": families[model_id]} if stage == "discovery" else None
            store.complete_task(task.id, task.fencing_token, {"summary": "ok"}, model_fields=fields)
        elif outcome != "inconclusive":  # an inconclusive gate keeps the task for its re-check
            status = "pending" if outcome == "failed" else outcome
            store.fail_task(task.id, task.fencing_token, {"rule": f"serving_{outcome}", "summary": "-"}, status=status)
        store.finish_attempt(attempt_id, AttemptEnd(outcome, 0, seconds))

    for model_id in families:
        for stage in STAGES[: STAGES.index("serving")]:
            if stage not in OPTIONAL_STAGES:  # opt-in stages are skipped by policy
                attempt(model_id, stage, 1.0, "completed")
    attempt("org/served", "serving", 70.0, "failed")
    attempt("org/served", "serving", 250.0, "inconclusive")
    attempt("org/served", "serving", 5.0, "completed", recheck=1)
    attempt("org/refused", "serving", 4.0, "skipped")
    samples = [Sample(*row) for row in store.costed_attempts() if row[0] == "serving"]
    replayed = [s for s in eta_error.load(board).samples() if s.stage == "serving"]
    store.close()
    assert samples == replayed == [Sample("serving", "causal_lm", 250.0), Sample("serving", "seq2seq", 4.0)]
    assert eta_error.main([str(board), "--derive-costs"]) == 0
    derived = json.loads(capsys.readouterr().out)["stages"]["serving"]
    assert derived == {"*": 127.0, "causal_lm": 250.0, "seq2seq": 4.0}


def test_the_bench_says_when_its_priors_are_in_sample_and_refuses_bad_input(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    board = tmp_path / "board.db"
    _finished_board(board, 1)
    assert eta_error.main([str(board), "--derive-costs"]) == 0
    derived = tmp_path / "derived.json"
    derived.write_text(capsys.readouterr().out)
    assert CostModel.load(derived).stages["healing"]["*"] == pytest.approx(0.3, abs=0.1)
    assert eta_error.main([str(board), "--costs", str(derived)]) == 0
    assert "(derived from this very board: in-sample)" in capsys.readouterr().out
    unfinished = tmp_path / "unfinished.db"
    BoardStore.init(unfinished).register_models([Registration(model_id="org/x")])
    for argv in (
        [str(tmp_path / "missing.db")],
        [str(unfinished)],
        [str(board), "--prior-scale", "nope=2"],
        [str(board), "--costs", str(tmp_path / "missing.json")],
    ):
        assert eta_error.main(argv) == 2
        err = capsys.readouterr().err
        assert err.startswith("error: ") and err.count("\n") == 1
