"""Stages for the chaos tests: real nested processes, real uv environments, files written slowly.

`run` of the WRITER stage syncs a real uv project in its adaptation directory (behaviour
"uv"; it first writes `<pid of the worker>.uv` into $CHAOS_PIDS), then starts a grandchild through run_command: a "timed loop" that rewrites
`state/part-<i>.txt` one file at a time (a half-written directory if it is not contained), and
which itself starts a great-grandchild that leaves its group with setsid (as a daemonising tool
would). The grandchild writes `<its pid>.loop` (holding the escaped pid) into $CHAOS_PIDS.
Its gate checks that every part holds the same generation: a mix is never gated.
"""

from __future__ import annotations

import json
import os
import sys
import textwrap
from pathlib import Path

from ascendbridge.config import uv_binary
from ascendbridge.runtime.process import run_command
from ascendbridge.stage_api import GateResult, StageContext, StageOutcome

PARTS = 6
PYPROJECT = textwrap.dedent("""\
    [project]
    name = "chaos-demo"
    version = "0.1.0"
    requires-python = ">=3.9"
    dependencies = []
    """)

LOOP = textwrap.dedent("""\
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
    """) % PARTS


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
        if behaviour.get("uv"):
            (ctx.adaptation_dir / "pyproject.toml").write_text(PYPROJECT)
            pids = Path(os.environ["CHAOS_PIDS"])
            pids.mkdir(parents=True, exist_ok=True)
            (pids / f"{os.getpid()}.uv").touch()  # this worker is about to start uv sync
            env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "UV_PROJECT_ENVIRONMENT")}
            res = run_command([uv_binary(), "sync", "--offline", "--python", sys.executable], cwd=ctx.adaptation_dir,
                              env=env, timeout_s=300, log=ctx.log)
            if not res.ok:
                return StageOutcome("failed", "uv sync failed", diagnosis={"rule": "uv_sync", "summary": res.tail(5)})
        generation = f"{self.name}:{ctx.task.fencing_token}"
        res = run_command([sys.executable, "-c", LOOP, str(ctx.adaptation_dir / "state"), generation,
                           str(_hold(ctx))], cwd=ctx.adaptation_dir, timeout_s=300, log=ctx.log)
        if not res.ok:
            return StageOutcome("failed", "loop failed", diagnosis={"rule": "loop", "summary": res.tail(5)})
        return StageOutcome("done", "state written", result={"state": str(ctx.adaptation_dir / "state")})

    def gate(self, ctx: StageContext) -> GateResult:
        parts = {p.read_text() for p in (ctx.adaptation_dir / "state").glob("part-*.txt")}
        count = len(list((ctx.adaptation_dir / "state").glob("part-*.txt")))
        ok = count == PARTS and len(parts) == 1
        return GateResult(ok, f"{count} parts, generations {sorted(parts)}")


DISCOVERY = WriterStage("discovery")
ADAPTATION = WriterStage("adaptation")
STAGES = "discovery=tests.chaos.chaos_stages:DISCOVERY,adaptation=tests.chaos.chaos_stages:ADAPTATION"
