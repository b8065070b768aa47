"""Stages for the chaos tests: real nested processes, real uv environments, files written slowly.

`run` of the WRITER stage syncs a real uv project in its adaptation directory (behaviour
"uv"; it first writes `<pid of the worker>.uv` into $CHAOS_PIDS), then starts a grandchild through run_command: a "timed loop" that rewrites
`state/part-<i>.txt` one file at a time (a half-written directory if it is not contained), and
which itself starts a great-grandchild that leaves its group with setsid (as a daemonising tool
would). The grandchild writes `<its pid>.loop` (holding the escaped pid) into $CHAOS_PIDS.
Its gate checks that every part holds the same generation: a mix is never gated. With behaviour
"slow_gate": "<stage>", the first attempt's gate of that stage first runs a probe through
run_command that writes `<its pid>.gate` (holding its own escaped child's pid) and waits
"gate_hold" seconds, so a kill can land mid-gate. With behaviour "escape_here", `run` itself
(not a command under run_command) starts a child that leaves its group, writes `<worker pid>.here`
(holding the child's pid) and sleeps: only the worker's own stop can reach that child.

AGENT_ADAPTATION's run hands the work to an agent through the real escalation runner
(ascendbridge.agents.runner) with the claude backend, which the tests point at the scripted
FakeAgentCli (tests/agents/fake_agent_cli.py); the agent writes the parts in its workspace copy
and the runner applies them once its checker saw one complete generation.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from ascendbridge.agents.runner import AgentTask, Verdict, run_agent
from ascendbridge.config import uv_binary
from ascendbridge.stage_api import GateResult, StageContext, StageOutcome
from ascendbridge.workers.process import run_command

PARTS = 6
PYPROJECT = textwrap.dedent("""\
    [project]
    name = "chaos-demo"
    version = "0.1.0"
    requires-python = ">=3.9"
    dependencies = []
    """)

LOOP = (
    textwrap.dedent("""\
    import os, subprocess, sys, time
    from pathlib import Path
    state, generation, hold = Path(sys.argv[1]), sys.argv[2], float(sys.argv[3])
    pids = Path(os.environ["CHAOS_PIDS"])
    pids.mkdir(parents=True, exist_ok=True)
    escaped = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"], start_new_session=True)
    (pids / f"{os.getpid()}.loop").write_text(str(escaped.pid))
    state.mkdir(exist_ok=True)
    for i in range(%d):
        (state / f"part-{i}.txt").write_text(generation)
        time.sleep(hold)
    escaped.kill()
    """)
    % PARTS
)

GATE_PROBE = textwrap.dedent("""\
    import os, subprocess, sys, time
    from pathlib import Path
    pids = Path(os.environ["CHAOS_PIDS"])
    pids.mkdir(parents=True, exist_ok=True)
    escaped = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"], start_new_session=True)
    (pids / f"{os.getpid()}.gate").write_text(str(escaped.pid))
    time.sleep(float(sys.argv[1]))
    escaped.kill()
    """)


def _hold(ctx: StageContext) -> float:
    try:
        return float(json.loads(ctx.model.description or "{}").get("hold", 0.3))
    except ValueError:
        return 0.3


class WriterStage:
    def __init__(self, name: str) -> None:
        self.name = name

    def run(self, ctx: StageContext) -> StageOutcome:
        behaviour = json.loads(ctx.model.description or "{}")
        if behaviour.get("escape_here"):
            pids = Path(os.environ["CHAOS_PIDS"])
            pids.mkdir(parents=True, exist_ok=True)
            escaped = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"], start_new_session=True)
            (pids / f"{os.getpid()}.here").write_text(str(escaped.pid))
            time.sleep(float(behaviour["escape_here"]))
            escaped.kill()
        if behaviour.get("uv"):
            (ctx.adaptation_dir / "pyproject.toml").write_text(PYPROJECT)
            pids = Path(os.environ["CHAOS_PIDS"])
            pids.mkdir(parents=True, exist_ok=True)
            (pids / f"{os.getpid()}.uv").touch()  # this worker is about to start uv sync
            env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "UV_PROJECT_ENVIRONMENT")}
            res = run_command(
                [uv_binary(), "sync", "--offline", "--python", sys.executable],
                cwd=ctx.adaptation_dir,
                env=env,
                timeout_s=300,
                log=ctx.log,
            )
            if not res.ok:
                return StageOutcome("failed", "uv sync failed", diagnosis={"rule": "uv_sync", "summary": res.tail(5)})
        generation = f"{self.name}:{ctx.task.fencing_token}"
        res = run_command(
            [sys.executable, "-c", LOOP, str(ctx.adaptation_dir / "state"), generation, str(_hold(ctx))],
            cwd=ctx.adaptation_dir,
            timeout_s=300,
            log=ctx.log,
        )
        if not res.ok:
            return StageOutcome("failed", "loop failed", diagnosis={"rule": "loop", "summary": res.tail(5)})
        return StageOutcome("done", "state written", result={"state": str(ctx.adaptation_dir / "state")})

    def gate(self, ctx: StageContext) -> GateResult:
        behaviour = json.loads(ctx.model.description or "{}")
        if behaviour.get("slow_gate") == self.name and ctx.attempt == 1:
            res = run_command(
                [sys.executable, "-c", GATE_PROBE, str(behaviour.get("gate_hold", 5))],
                cwd=ctx.adaptation_dir,
                timeout_s=300,
                log=ctx.log,
            )
            if not res.ok:
                return GateResult(False, f"gate probe exited with {res.exit_code}")
        parts = {p.read_text() for p in (ctx.adaptation_dir / "state").glob("part-*.txt")}
        count = len(list((ctx.adaptation_dir / "state").glob("part-*.txt")))
        ok = count == PARTS and len(parts) == 1
        return GateResult(ok, f"{count} parts, generations {sorted(parts)}")


def _one_generation(copy: Path, _changed: list[str]) -> Verdict:
    parts = {p.read_text() for p in (copy / "state").glob("part-*.txt")}
    count = len(list((copy / "state").glob("part-*.txt")))
    return Verdict(count == PARTS and len(parts) == 1, f"{count} parts, generations {sorted(parts)}")


class AgentWriterStage(WriterStage):
    """The parts are written by a (scripted) agent in the sandbox, not by the stage itself."""

    def run(self, ctx: StageContext) -> StageOutcome:
        task = AgentTask(
            role="healer",
            kind="heal",
            directory=ctx.adaptation_dir,
            model_id=ctx.model.model_id,
            stage=ctx.task.stage,
            signature="chaos0001",
            failure="parts missing",
            settings={"agent_backend": "claude", "agent_max_attempts": 10},
            context={
                "model": {"model_id": ctx.model.model_id, "architecture": "ChaosModel", "model_type": "chaos"},
                "spec": {"name": ctx.adaptation_dir.name, "task_family": "chaos", "model_class": "ChaosModel"},
                "failing_command": "none",
                "log_tail": "parts missing",
                "checker_report": "not run",
                "diagnosis": {
                    "rule": "unclassified",
                    "summary": "parts missing",
                    "phase": "run",
                    "exit_code": 1,
                    "timed_out": False,
                    "error": "parts missing",
                },
            },
        )
        run = run_agent(task, _one_generation, ctx.board_path, ctx.say)
        if run is None or run.outcome != "accepted":
            return StageOutcome(
                "failed",
                f"agent: {run.outcome if run else 'none'}",
                diagnosis={"rule": "agent", "summary": run.detail if run else "no agent"},
            )
        return StageOutcome("done", "agent wrote the state", result={"state": str(ctx.adaptation_dir / "state")})


DISCOVERY = WriterStage("discovery")
ADAPTATION = WriterStage("adaptation")
STAGES = "discovery=tests.chaos.chaos_stages:DISCOVERY,adaptation=tests.chaos.chaos_stages:ADAPTATION"
AGENT_ADAPTATION = AgentWriterStage("adaptation")
AGENT_STAGES = "discovery=tests.chaos.chaos_stages:DISCOVERY,adaptation=tests.chaos.chaos_stages:AGENT_ADAPTATION"
