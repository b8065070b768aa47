"""Chaos in the middle of a gate and of a scripted agent's sandbox run: after the kill nothing of
the attempt survives (per-attempt marker under /proc), the task is neither lost nor completed
twice, and the promoted adaptation directory is always the previous gated state or the new one.

Same real board, real processes and helpers as test_chaos_containment.py; the agent is the
scripted FakeAgentCli (no LLM exists here) started by the real escalation runner.
"""

from __future__ import annotations

import json
import os
import random
import signal
import sys
import threading
import time
from pathlib import Path

import pytest

from ascendbridge.board import BoardStore
from ascendbridge.board.records import Registration
from ascendbridge.naming import base_adaptation_name
from ascendbridge.package.generator import generate
from ascendbridge.package.spec import AdaptationSpec, InputRecipe, ModelSource
from tests.agents.agent_support import FAKE_CLI
from tests.benchmark.bench_support import TINY_MODELS
from tests.chaos.chaos_stages import AGENT_STAGES, PARTS
from tests.chaos.test_chaos_containment import (
    assert_no_loss_no_duplicates,
    marked,
    register,
    start_lead,
    survivors,
    wait_gone,
)
from tests.teamlead.tl_support import alive, statuses, wait_for

pytestmark = pytest.mark.slow  # fast tier: kills real stage runs


class Swapped(Exception):
    """The directory being read was exchanged out of its path (and is being removed) mid-read."""


def state_of(tmp: Path, model_id: str) -> list[str]:
    """The parts of the promoted adaptation directory, in order ([] when there is none yet).

    Reads through one directory fd: the promotion exchanges the whole directory atomically, and
    reading part by part through the path would mix the two generations across the swap."""
    promoted = tmp / "adaptations" / base_adaptation_name(model_id)
    try:
        top = os.open(promoted, os.O_RDONLY | os.O_DIRECTORY)
    except FileNotFoundError:
        return []
    try:
        state = os.open("state", os.O_RDONLY | os.O_DIRECTORY, dir_fd=top)
        try:
            parts = [_read_at(state, n) for n in sorted(os.listdir(state)) if n.startswith("part-")]
        finally:
            os.close(state)
    except FileNotFoundError:
        parts = []
    try:
        if os.fstat(top).st_ino != os.stat(promoted).st_ino:  # swapped out, perhaps half removed
            raise Swapped(promoted)
    finally:
        os.close(top)
    return parts


def _read_at(directory: int, name: str) -> str:
    fd = os.open(name, os.O_RDONLY, dir_fd=directory)
    with os.fdopen(fd) as handle:
        return handle.read()


def one_generation(parts: list[str], stage: str) -> bool:
    return len(parts) == PARTS and len(set(parts)) == 1 and parts[0].startswith(stage + ":")


def gate_probe_of(tmp: Path, model_id: str) -> int | None:
    """The live gate probe working on `model_id`'s staging copy, if one has started."""
    name = base_adaptation_name(model_id)
    for path in (tmp / "pids").glob("*.gate") if (tmp / "pids").is_dir() else []:
        pid = int(path.name.split(".")[0])
        try:
            if name in os.readlink(f"/proc/{pid}/cwd") and alive(pid) and pid in marked():
                return pid
        except OSError:
            continue
    return None


def parent_of(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


def test_kill_mid_gate_of_its_worker_or_its_subprocess_keeps_the_previous_state(
    board: BoardStore, tmp_path: Path
) -> None:
    rng = random.Random(23)
    models = {"org/gw": "worker", "org/gp": "probe"}  # what is killed mid-gate, per model
    register(board, {m: {"hold": 0.05, "slow_gate": "discovery", "gate_hold": 20} for m in models})
    for model in models:  # the previous gated state the killed attempt must not disturb
        state = tmp_path / "adaptations" / base_adaptation_name(model) / "state"
        state.mkdir(parents=True)
        for i in range(PARTS):
            (state / f"part-{i}.txt").write_text("previous:0")
    lead = start_lead(board.path, tmp_path, "--workers", "2")
    try:
        for model, victim in models.items():
            wait_for(
                lambda model=model: gate_probe_of(tmp_path, model), 120, interval=0.05, what=f"the gate of {model}"
            )
            probe = gate_probe_of(tmp_path, model)
            assert probe is not None
            marker = marked()[probe]
            escaped = int((tmp_path / "pids" / f"{probe}.gate").read_text())
            previous = state_of(tmp_path, model)
            assert one_generation(previous, "previous"), previous  # the attempt's parts are in its staging copy
            time.sleep(rng.uniform(0.1, 1.0))
            os.kill(parent_of(probe) if victim == "worker" else probe, signal.SIGKILL)
            wait_for(lambda escaped=escaped: not alive(escaped), 15, what=f"the gate's escaped child ({model})")
            wait_gone({marker}, 30, f"every process of the killed gate of {model}")
            assert state_of(tmp_path, model) == previous
        lead.wait(timeout=180)
    finally:
        lead.kill()
    assert lead.returncode == 0, (tmp_path / "lead.out").read_text()[-3000:]
    rules = set()
    for model in models:
        assert statuses(board)[(model, "discovery")] == "completed"
        assert one_generation(state_of(tmp_path, model), "discovery"), state_of(tmp_path, model)
        rules |= {a.diagnosis.get("rule") for _, a in board.list_attempts(model, "discovery") if a.diagnosis}
    assert {"gate_crashed", "gate_failed"} <= rules, rules  # each killed gate counted as a failed attempt
    assert not [p for p, m in marked().items() if m.endswith("@" + str(board.path.resolve()))]
    assert_no_loss_no_duplicates(board)


def agent_env(tmp: Path) -> dict[str, str]:
    """The team lead's environment with the scripted agent CLI as `claude`."""
    (tmp / "agent_calls.jsonl").touch()
    return {
        "ASCENDBRIDGE_EXTRA_STAGES": AGENT_STAGES,
        "FAKE_AGENT_SCRIPT": str(tmp / "agent_script.json"),
        "FAKE_AGENT_LOG": str(tmp / "agent_calls.jsonl"),
        "ASCENDBRIDGE_CLAUDE_BIN": f"{sys.executable} {FAKE_CLI}",
        "ASCENDBRIDGE_AGENT_MEMORY": str(tmp / "agent-memory"),
    }


def script_agent(tmp: Path, *extra: dict[str, object]) -> None:
    writes = [{"write": f"state/part-{i}.txt", "text": "adaptation:agent"} for i in range(PARTS)]
    (tmp / "agent_script.json").write_text(json.dumps({"actions": [*writes, *extra]}))


class DirectoryWatch(threading.Thread):
    """Samples the promoted directory until stopped; keeps every sample that is neither the
    previous gated state nor the new one (an empty or half-copied directory)."""

    def __init__(self, tmp: Path, model_id: str) -> None:
        super().__init__(daemon=True)
        self.tmp, self.model_id, self.bad, self.samples = tmp, model_id, [], 0
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.wait(0.005):
            try:
                parts = state_of(self.tmp, self.model_id)
            except Swapped:  # what we opened was exchanged out mid-read: a stale generation
                continue
            except OSError as exc:
                parts = [f"unreadable: {exc}"]
            self.samples += 1
            if not (one_generation(parts, "discovery") or one_generation(parts, "adaptation")):
                self.bad.append(parts)


def test_team_lead_killed_during_a_scripted_agent_run_leaves_no_agent_and_an_intact_directory(
    board: BoardStore, tmp_path: Path
) -> None:
    rng = random.Random(31)
    child_pid = tmp_path / "agent-child.pid"
    script_agent(tmp_path, {"spawn": str(child_pid)}, {"sleep": 600})  # writes in its copy, then hangs
    env = agent_env(tmp_path)
    register(board, {"org/agent": {"hold": 0.05}})
    lead = start_lead(board.path, tmp_path, "--stages", "discovery,adaptation", **env)
    watch = DirectoryWatch(tmp_path, "org/agent")
    try:
        wait_for(child_pid.exists, 120, interval=0.05, what="the agent to start its child")
        wait_for(lambda: int(child_pid.read_text() or 0) in marked(), 10, what="the agent's child")
        child = int(child_pid.read_text())
        marker = marked()[child]
        agents = [p for p, m in marked().items() if m == marker and str(FAKE_CLI) in _cmdline(p)]
        assert agents, "the agent CLI carries its attempt's marker"
        assert one_generation(state_of(tmp_path, "org/agent"), "discovery")
        watch.start()
        time.sleep(rng.uniform(0.1, 1.0))  # the agent is mid-run
        lead.kill()
        lead.wait()
        # A process tearing down has no environ left (so no marker) yet is not a zombie: wait for both.
        wait_for(
            lambda: not survivors(marker) and not alive(child) and not any(alive(p) for p in agents),
            15,
            what="the agent and its child to die with the team lead",
        )
        script_agent(tmp_path)  # the next attempt's agent finishes
        lead = start_lead(board.path, tmp_path, "--stages", "discovery,adaptation", **env)
        lead.wait(timeout=180)
    finally:
        lead.kill()
        watch.stop.set()
    watch.join(timeout=5)
    assert lead.returncode == 0, (tmp_path / "lead.out").read_text()[-3000:]
    assert watch.samples > 10 and watch.bad == [], watch.bad[:3]
    assert statuses(board)[("org/agent", "adaptation")] == "completed"
    assert state_of(tmp_path, "org/agent") == ["adaptation:agent"] * PARTS
    kinds = [e.kind for e in board.list_events(limit=10**6) if e.stage == "adaptation"]
    assert "released" in kinds or "lease_expired" in kinds  # the killed attempt went back to pending
    assert not [p for p, m in marked().items() if m.endswith("@" + str(board.path.resolve()))]
    assert_no_loss_no_duplicates(board)


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def _snapshot(directory: Path) -> dict[str, bytes]:
    """Every file of an adaptation directory except its environment (hard-linked into copies)."""
    return {
        p.relative_to(directory).as_posix(): p.read_bytes()
        for p in sorted(directory.rglob("*"))
        if p.is_file() and ".venv" not in p.relative_to(directory).parts
    }


def _in_timed_loop(tmp: Path, marker: str) -> bool:
    """accuracy_run.py of the attempt is alive and has logged the line printed just before its
    timed calls (and not yet the latency line printed after them)."""
    log = tmp / "logs" / base_adaptation_name("demo/tiny-bert") / "discovery" / "attempt-1.log"
    text = log.read_text() if log.is_file() else ""
    running = any(m == marker and "accuracy_run.py" in _cmdline(p) for p, m in marked().items())
    return running and "accuracy vs reference:" in text and "latency cpu" not in text


@pytest.mark.scenario  # the kills in the scripted stages above run in the suite; docs/testing.md, "Tiers"
@pytest.mark.timeout(900)
def test_team_lead_killed_in_the_real_benchmarks_timed_loop(board: BoardStore, tmp_path: Path) -> None:
    """The real BENCHMARK_STAGE (uv sync with torch, accuracy_run.py) on the smallest demo model;
    registered as this board's first stage so the team lead runs it alone."""
    rng = random.Random(41)
    model_dir = tmp_path / "models" / "tiny-bert"
    model_dir.mkdir(parents=True)
    (model_dir / "config.json").write_text(json.dumps(TINY_MODELS["tiny-bert"]["config"]))
    ((record, _),) = board.register_models(
        [Registration(model_id="demo/tiny-bert", source="local", path=str(model_dir))]
    )
    directory = tmp_path / "adaptations" / record.adaptation_name
    spec = AdaptationSpec(
        name=record.adaptation_name,
        task_family="feature_extraction",
        model_class="BertModel",
        model_type="bert",
        inputs=InputRecipe(batch_size=2, seq_len=16),
        model=ModelSource(model_id=record.model_id, source="local", path=str(model_dir), has_weights=False),
    )
    assert generate(spec, directory).ok
    before = _snapshot(directory)
    env = {
        "ASCENDBRIDGE_EXTRA_STAGES": "discovery=benchmark.stage:BENCHMARK_STAGE",
        "ASCENDBRIDGE_DEVICE": "cpu",
        "ASCENDBRIDGE_BENCHMARK_DTYPES": "float32",
        "ASCENDBRIDGE_BENCHMARK_WARMUP": "1",
        "ASCENDBRIDGE_BENCHMARK_ITERS": "1500",
        "ASCENDBRIDGE_BENCHMARK_NUM_SAMPLES": "1",
    }
    lead = start_lead(board.path, tmp_path, **env)
    try:
        wait_for(
            lambda: [m for m in marked().values() if m.endswith("@" + str(board.path.resolve()))],
            120,
            what="the benchmark attempt",
        )
        marker = next(m for m in marked().values() if m.endswith("@" + str(board.path.resolve())))
        wait_for(lambda: _in_timed_loop(tmp_path, marker), 600, interval=0.05, what="the timed loop")
        time.sleep(rng.uniform(0.0, 0.5))  # 2 x 1,500 timed calls take seconds
        assert _in_timed_loop(tmp_path, marker), "the timed loop ended before the kill: raise the iterations"
        lead.kill()
        lead.wait()
        wait_gone({marker}, 30, "accuracy_run.py and uv to die with the team lead")
        assert _snapshot(directory) == before  # the killed run wrote only into its staging copy
        env["ASCENDBRIDGE_BENCHMARK_ITERS"] = "3"
        lead = start_lead(board.path, tmp_path, **env)
        lead.wait(timeout=600)
    finally:
        lead.kill()
    assert lead.returncode == 0, (tmp_path / "lead.out").read_text()[-3000:]
    assert statuses(board)[("demo/tiny-bert", "discovery")] == "completed"
    after = _snapshot(directory)
    assert "benchmark_metrics_cpu_float32_dry_run_synthetic.json" in after and after.keys() > before.keys()
    assert not [p for p, m in marked().items() if m.endswith("@" + str(board.path.resolve()))]
    assert_no_loss_no_duplicates(board)
