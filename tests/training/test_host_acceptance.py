"""Host acceptance (training/preflight.py, ascendbridge/hostcheck/): the ratios, the table of
expectations, the preflight's refusal of a host far under its expectation, its cache on the board
(a second preflight on the same host and stack measures nothing), and one real measurement on this
CPU through the shared torch environment (slow tier)."""

from __future__ import annotations

import io
import json
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest

from ab_runtime.result import read_result
from ascendbridge.board import BoardStore, Registration
from ascendbridge.board.acceptance import ACCEPTANCE_EVENT, WARNING_EVENT
from ascendbridge.board.records import TrainingJob
from ascendbridge.config import REPO_ROOT
from ascendbridge.hostcheck.expectations import expectation_for, table
from ascendbridge.hostcheck.judge import ACCEPTED, BELOW, judge, ratio
from ascendbridge.stage_api import StageContext
from ascendbridge.workers import payload
from tests.dashboard.dash_support import served
from tests.training.train_support import CORPUS, training_context, training_package
from training.preflight import accept, preflight
from training.settings import TrainingSettings
from training.stage import TRAINING_STAGE

HOST = socket.gethostname()


def measurement(kind: str = "cpu", name: str = "Test CPU", **values: float) -> dict[str, Any]:
    """A measurement as ab_runtime.host_acceptance reports it, with the given figures' values."""
    figures: dict[str, Any] = {
        key: {"value": value, "median": value * 0.9, "low": value * 0.5, "unit": "TFLOP/s"}
        for key, value in values.items()
    }
    figures["host_to_device"] = {"na": "n/a, host is the device"}
    return {"ok": True, "device": {"kind": kind, "name": name}, "figures": figures}


def context(board: BoardStore, tmp_path: Path) -> StageContext:
    ((record, _),) = board.register_models(
        [Registration(model_id="demo/m", source="local", path=str(tmp_path), training=TrainingJob(data=str(CORPUS)))]
    )
    task = board.list_tasks(stage="training", model_id=record.model_id)[0]
    return StageContext(
        model=record, task=task, adaptation_dir=tmp_path, board_path=Path(board.path), log=io.StringIO()
    )


class Counting:
    """An injected measurement that counts its calls."""

    def __init__(self, result: dict[str, Any]) -> None:
        self.result, self.calls = result, 0

    def __call__(self) -> dict[str, Any]:
        self.calls += 1
        return self.result


def test_the_ratio_is_measured_over_expected_and_none_without_an_expectation() -> None:
    assert ratio(25.0, 100.0) == 0.25
    assert ratio(None, 100.0) is None and ratio(1.0, None) is None and ratio(1.0, 0.0) is None


def test_a_listed_device_is_judged_against_its_datasheet_and_a_cpu_against_its_first_acceptance() -> None:
    h100 = expectation_for("cuda", "NVIDIA H100 80GB HBM3")
    assert h100 is not None and h100.figures["gemm_bfloat16"] == 989.5 and "nvidia.com" in h100.source_url
    judged = judge(measurement("cuda", "NVIDIA H100 80GB HBM3", gemm_bfloat16=700.0, gemm_float32=20.0), h100, None)
    rows = {r["figure"]: r for r in judged["rows"]}
    assert rows["gemm_bfloat16"]["ratio"] == round(700.0 / 989.5, 4) and not rows["gemm_bfloat16"]["below"]
    assert rows["gemm_float32"]["ratio"] == round(20.0 / 67.0, 4) and rows["gemm_float32"]["below"]
    assert judged["verdict"] == BELOW and judged["below"] == ["gemm_float32"]
    assert rows["host_to_device"]["ratio"] is None and rows["host_to_device"]["note"].startswith("n/a")
    assert rows["gemm_bfloat16"]["source"] == "NVIDIA H100 SXM5 80GB datasheet"
    assert judged["source_url"] == "https://www.nvidia.com/en-us/data-center/h100/"

    cpu = expectation_for("cpu", "AMD EPYC")
    first = measurement(gemm_float32=0.2)
    assert judge(first, cpu, None)["rows"][0]["ratio"] == 1.0  # the first acceptance is its own baseline
    later = judge(measurement(gemm_float32=0.05), cpu, first, min_ratio=0.5)
    assert later["rows"][0]["expected"] == 0.2 and later["rows"][0]["source"] == "this host's first acceptance"
    assert later["rows"][0]["ratio"] == 0.25 and later["verdict"] == BELOW
    assert judge(measurement(gemm_float32=0.15), cpu, first)["verdict"] == ACCEPTED


def test_every_row_of_the_table_is_sourced_or_says_why_not() -> None:
    for row in table():
        assert row.missing or (row.figures and row.source_url.startswith("https://")), row.name
    assert expectation_for("cuda", "NVIDIA H200").name.startswith("NVIDIA H200")  # type: ignore[union-attr]
    assert expectation_for("npu", "Ascend910B3").figures == {}  # type: ignore[union-attr]  # no vendor figure found
    assert expectation_for("cuda", "NVIDIA A100-SXM4-80GB") is None


def test_a_long_job_on_a_host_far_under_its_expectation_is_refused_with_the_figures(
    board: BoardStore, tmp_path: Path
) -> None:
    ctx = context(board, tmp_path)
    first = measurement(gemm_float32=1.0, gemm_bfloat16=2.0)
    board.record_host_acceptance(
        {"host": HOST, "stack_id": "older-stack", "measurement": first, "judged": judge(first, None, None)}, "first"
    )
    slow = Counting(measurement(gemm_float32=0.1, gemm_bfloat16=1.9))  # float32 forced 10x under its baseline
    refuse = TrainingSettings(host_acceptance="refuse", acceptance_long_steps=100)
    out = preflight(ctx, refuse, 500, lambda: "new-stack", slow)
    assert out.refusal is not None and out.refusal.status == "failed", ctx.log.getvalue()
    diagnosis = out.refusal.diagnosis or {}
    assert diagnosis["rule"] == "host_below_expectation" and diagnosis["retryable"] is False
    (below,) = diagnosis["below"]
    assert (below["figure"], below["measured"], below["expected"], below["ratio"]) == ("gemm_float32", 0.1, 1.0, 0.1)
    assert "GEMM float32 0.1 TFLOP/s vs 1 expected (ratio 0.10)" in out.refusal.summary
    assert [e.kind for e in out.refusal.events] == [ACCEPTANCE_EVENT, WARNING_EVENT]
    assert "BELOW" in ctx.log.getvalue()  # the table, in the attempt's log

    short = preflight(ctx, refuse, 50, lambda: "new-stack", slow)  # a short job: warned, not refused
    assert short.refusal is None and [e.kind for e in short.events] == [ACCEPTANCE_EVENT, WARNING_EVENT]
    warned = preflight(ctx, TrainingSettings(host_acceptance="warn"), 500, lambda: "new-stack", slow)
    assert warned.refusal is None and warned.events[-1].kind == WARNING_EVENT
    assert preflight(ctx, TrainingSettings(host_acceptance="off"), 500, lambda: "new-stack", slow).events == []


def test_the_second_preflight_on_the_same_host_and_stack_reads_the_board_instead_of_measuring(
    board: BoardStore, tmp_path: Path
) -> None:
    ctx = context(board, tmp_path)
    measure = Counting(measurement(gemm_float32=0.5))
    settings = TrainingSettings()
    first = preflight(ctx, settings, 30, lambda: "stack-a", measure)
    assert measure.calls == 1 and [e.kind for e in first.events] == [ACCEPTANCE_EVENT]
    # the team lead writes the attempt's events with its verdict: the acceptance event is the host's record
    discovery = board.list_tasks(stage="discovery", model_id="demo/m")[0]
    claimed = board.claim_task(discovery.id, "worker", 60)
    board.fail_task(
        discovery.id, claimed.fencing_token, {"rule": "x"}, "pending", events=[payload.to_data(e) for e in first.events]
    )
    (record,) = board.host_acceptances(HOST)
    assert (record.stack_id, record.verdict, record.device_name) == ("stack-a", ACCEPTED, "Test CPU")

    again = preflight(ctx, settings, 30, lambda: "stack-a", measure)
    assert measure.calls == 1 and again.events == [] and again.judged == first.judged  # not measured again
    assert "from the board" in ctx.log.getvalue()
    other = preflight(ctx, settings, 30, lambda: "stack-b", measure)  # another stack: measured
    assert measure.calls == 2 and [e.kind for e in other.events] == [ACCEPTANCE_EVENT]


def test_measuring_a_stack_again_keeps_the_hosts_first_acceptance_as_its_baseline(board: BoardStore) -> None:
    """`--fresh` replaces the stack's record; the host's first figures stay the CPU's expectation."""
    for value in (1.0, 0.9, 0.3):
        judged, record = accept(
            board.host_acceptances(HOST), HOST, "s", lambda v=value: measurement(gemm_float32=v), 0.5, fresh=True
        )
        assert record is not None
        board.record_host_acceptance(record, "measured again")
    (only,) = board.host_acceptances(HOST)
    assert only.data["baseline"]["measurement"]["figures"]["gemm_float32"]["value"] == 1.0
    (exported,) = json.loads(json.dumps(board.export()))["host_acceptance"]  # what `board_ops.py export` writes
    assert (exported["host"], exported["stack_id"], exported["verdict"]) == (HOST, "s", BELOW)
    row = judged["rows"][0]
    assert (row["expected"], row["ratio"], judged["verdict"]) == (1.0, 0.3, BELOW)


def test_the_hosts_page_shows_each_hosts_acceptance_table(board: BoardStore, tmp_path: Path) -> None:
    first = measurement(gemm_float32=0.8)
    slow = measurement(gemm_float32=0.2)
    board.record_host_acceptance(
        {"host": "box-a", "stack_id": "s1", "measurement": first, "judged": judge(first, None, None)}, "box-a first"
    )
    judged = judge(slow, None, first)
    board.record_host_acceptance({"host": "box-a", "stack_id": "s2", "measurement": slow, "judged": judged}, "slow")
    assert [e.kind for e in board.list_events(limit=3, newest_first=True)][:2] == [WARNING_EVENT, ACCEPTANCE_EVENT]
    (tmp_path / "logs").mkdir()
    with served(tmp_path, Path(board.path), tmp_path / "logs", tmp_path / "adaptations") as url:
        page = httpx.get(f"{url}/agents", timeout=30).text
    section = page[page.index('id="host-acceptance"') :]
    assert section.count("GEMM float32") == 2 and "stack s1" in section and "stack s2" in section
    assert "0.25 <strong>below</strong>" in section and "this host&#39;s first acceptance" in section
    assert section.index("stack s2") < section.index("stack s1")  # newest first
    assert "n/a, host is the device" in section


def test_a_measurement_that_fails_is_a_warning_and_never_stops_the_job(board: BoardStore, tmp_path: Path) -> None:
    def broken() -> dict[str, Any]:
        raise RuntimeError("no device")

    out = preflight(context(board, tmp_path), TrainingSettings(host_acceptance="refuse"), 500, lambda: "s", broken)
    assert out.refusal is None and [e.kind for e in out.events] == [WARNING_EVENT]
    assert "could not measure: no device" in out.events[0].message


@pytest.mark.timeout(300)
def test_this_cpu_measured_for_real_and_accepted_by_hand_then_read_back(torch_python: Path, board: BoardStore) -> None:
    """The measurement module in the torch environment (2 gloo processes for the all-reduce), then the
    command a person runs: measured and recorded once, shown from the board the second time."""
    proc = subprocess.run(
        [str(torch_python), "-m", "ab_runtime.host_acceptance", "--device", "cpu", "--budget-s", "0.3", "--allreduce"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=240,
    )
    result = read_result(proc.stdout)
    assert proc.returncode == 0 and result and result["ok"], proc.stdout[-2000:] + proc.stderr[-2000:]
    figures = result["figures"]
    for name in ("gemm_float32", "gemm_bfloat16", "copy_bandwidth"):
        assert figures[name]["value"] >= figures[name]["median"] >= figures[name]["low"] > 0, figures[name]
    assert figures["host_to_device"] == {"na": "n/a, host is the device"}
    assert [s["bytes"] for s in figures["allreduce"]["sizes"]] == [65536, 1048576, 16777216]
    assert all(s["value"] > 0 for s in figures["allreduce"]["sizes"]) and figures["allreduce"]["backend"] == "gloo"
    assert (
        result["load_average"] and result["cpus"] >= 1
    )  # the load it was measured under (its time: docs/measurements)

    script = [sys.executable, "training/scripts/host_acceptance.py", "--python", str(torch_python), "--device", "cpu"]
    by_hand = subprocess.run([*script, "--json"], cwd=REPO_ROOT, capture_output=True, text=True, timeout=240)
    assert by_hand.returncode == 0 and "measured now" in by_hand.stderr, by_hand.stderr[-2000:]
    judged = json.loads(by_hand.stdout)
    assert judged["verdict"] == ACCEPTED and {r["ratio"] for r in judged["rows"] if r["ratio"] is not None} == {1.0}
    shown = subprocess.run(script, cwd=REPO_ROOT, capture_output=True, text=True, timeout=240)
    assert shown.returncode == 0 and "the board record" in shown.stderr and "GEMM float32" in shown.stdout
    (record,) = board.host_acceptances(HOST)
    assert record.device_kind == "cpu" and record.data["measurement"]["figures"]["gemm_float32"]["value"] > 0


@pytest.mark.parametrize("device", ["npu", "cuda"])
def test_an_accelerator_this_host_lacks_is_refused_by_the_device_layer_never_measured_on_cpu(
    torch_python: Path, device: str
) -> None:
    proc = subprocess.run(
        [str(torch_python), "-m", "ab_runtime.host_acceptance", "--device", device],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    result = read_result(proc.stdout)
    assert proc.returncode == 1 and result is not None and result["ok"] is False, proc.stdout + proc.stderr
    assert f"device '{device}' requested but not available" in result["error"] and "figures" not in result


def _cpu_name() -> str:
    """The CPU's name as the device layer reports it (ab_runtime/device.py reads the same line)."""
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    pytest.skip("no /proc/cpuinfo model name here")


@pytest.mark.timeout(600)
def test_the_stage_refuses_a_long_job_on_a_host_whose_first_acceptance_it_no_longer_reaches(
    board: BoardStore, torch_python: Path
) -> None:
    """Through the stage's run: the board's first acceptance of this host (its baseline) is set a
    million times above anything it measures, so the stage measures, judges and refuses the job
    before its baseline contract, with the figures; nothing is trained."""
    job = TrainingJob(data=str(CORPUS), steps=4)
    record, directory = training_package(board, "demo/llama", job, python=torch_python, has_weights=True)
    fast = measurement(name=_cpu_name(), gemm_float32=1e6, gemm_bfloat16=1e6, copy_bandwidth=1e9)
    board.record_host_acceptance(
        {"host": HOST, "stack_id": "an-older-stack", "measurement": fast, "judged": judge(fast, None, None)}, "first"
    )
    settings = {"training_threads": 1, "training_host_acceptance": "refuse", "training_acceptance_long_steps": 4}
    ctx = training_context(board, record, directory, settings)
    outcome = TRAINING_STAGE.run(ctx)
    diagnosis = outcome.diagnosis or {}
    assert outcome.status == "failed" and diagnosis["rule"] == "host_below_expectation", (outcome, ctx.log.getvalue())
    assert diagnosis["retryable"] is False
    below = {r["figure"]: r for r in diagnosis["below"]}
    assert {"gemm_float32", "gemm_bfloat16", "copy_bandwidth"} <= set(below)
    assert below["gemm_float32"]["expected"] == 1e6 and 0 < below["gemm_float32"]["measured"] < 1e6
    assert [e.kind for e in outcome.events] == [ACCEPTANCE_EVENT, WARNING_EVENT]
    assert outcome.events[0].data["stack_id"] != "an-older-stack"  # the package's own stack, measured now
    assert not (directory / "train/run/contract.json").exists() and not (directory / "train/run/metrics.jsonl").exists()
