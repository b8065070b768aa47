"""Small real stages for team-lead tests: they write evidence files; their gates check them.

What a stage does for a model comes from the model's description, a JSON object mapping stage
name to a behaviour ("ok" when absent): ok, fail_once, fail, lie (claims done, writes nothing),
blocked, skipped, crash, fail_here (fails naming the directory it works in),
hang_once (sleeps forever on attempt 1), sleep:SECONDS, phase:NAME:SECONDS (sleeps in that cost
phase, ab_runtime/phases.py), meta, spam,
figures:X (done, proposes speedup X), figures_lie:X (proposes speedup X, writes no evidence),
spec_change_once (fails with a spec change until a stage logged the directives it was given:
every stage writes the open directives of its context to runs.log),
agent (done, after an agent run recorded in the agent history, which counts the runs before it),
inconclusive:N (done; its gate cannot decide the first N times it looks at the attempt's copy, then
passes; every gate look appends "gate" to gate.looks there),
memory_killed / killed (fails after a contained command of its run died by SIGKILL, while the OOM
killer's counter rose, or did not: a stand-in, since the kernel's cannot be made to fire on a shared host),
memory_error (raises MemoryError), progress:N (N steps reported through ab_runtime/progress.py, a
line each, then one more step that waits, at most a minute, for a file `release` in the
attempt's directory).
Every run appends "<stage> attempt=<n> token=<t> settings=<json>" to <adaptation>/runs.log (in
the attempt's staging copy: it reaches adaptations/<name>/ with a passing gate).
"""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import cast

from ab_runtime.phases import PhaseName, phase
from ab_runtime.progress import Progress
from ascendbridge.agents import history
from ascendbridge.stage_api import FigureSet, GateResult, StageContext, StageOutcome
from ascendbridge.workers import oom
from ascendbridge.workers.process import run_command


class ToyStage:
    def __init__(self, name: str) -> None:
        self.name = name

    def _behaviour(self, ctx: StageContext) -> str:
        try:
            return str(json.loads(ctx.model.description or "{}").get(self.name, "ok"))
        except ValueError:
            return "ok"

    def _evidence(self, ctx: StageContext) -> Path:
        return ctx.adaptation_dir / f"{self.name}.evidence"

    def run(self, ctx: StageContext) -> StageOutcome:
        how = self._behaviour(ctx)
        with (ctx.adaptation_dir / "runs.log").open("a") as fh:
            fh.write(
                f"{self.name} attempt={ctx.attempt} token={ctx.task.fencing_token} "
                f"settings={json.dumps(ctx.settings, sort_keys=True)}\n"
            )
        ctx.say(f"toy {self.name}: {how} (attempt {ctx.attempt})")
        if ctx.directives:
            with (ctx.adaptation_dir / "runs.log").open("a") as fh:
                fh.write(f"{self.name} directives={json.dumps(ctx.directives, sort_keys=True)}\n")
        if how == "spec_change_once" and " directives=" not in (ctx.adaptation_dir / "runs.log").read_text():
            change = {"rule": "toy_rule", "summary": "toy needs a spec change", "finding": {"module_class": "Toy"}}
            return StageOutcome(
                "failed",
                change["summary"],
                diagnosis={"rule": "spec_change_needed", "summary": change["summary"]},
                spec_change=change,
            )
        if how == "fail" or (how == "fail_once" and ctx.attempt == 1):
            return StageOutcome("failed", "toy failure", diagnosis={"rule": "toy_failure", "summary": "toy failure"})
        if how == "fail_here":  # every attempt's staging copy has its own path
            summary = f"no usable package in {ctx.adaptation_dir}"
            return StageOutcome("failed", summary, diagnosis={"rule": "toy_failure", "summary": summary})
        if how == "blocked":
            return StageOutcome("blocked", "needs a human", diagnosis={"rule": "needs_token", "summary": "gated model"})
        if how == "skipped":
            return StageOutcome(
                "skipped",
                "too large",
                diagnosis={"rule": "too_large", "summary": "too large"},
                model_fields={"parameter_count": 10**12},
            )
        if how == "crash":
            raise RuntimeError("toy stage crashed")
        if how == "memory_error":
            raise MemoryError("toy allocation refused")
        if how in ("memory_killed", "killed"):
            return self._killed(rises=how == "memory_killed")
        if how == "hang_once" and ctx.attempt == 1:
            # A child in the worker's group too: a timeout must take both down.
            subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
            time.sleep(600)
        if how == "agent":
            runs_before = history.usage(ctx.board_path, ctx.model.model_id, "healer").attempts
            history.record_run(
                history.AgentRun(
                    backend="toy",
                    role="healer",
                    kind="heal",
                    outcome="no_change",
                    model_id=ctx.model.model_id,
                    stage=self.name,
                    detail=f"runs before this one: {runs_before}",
                )
            )
        if how.startswith("sleep:"):
            time.sleep(float(how.split(":", 1)[1]))
        if how.startswith("phase:"):
            _, name, seconds = how.split(":")
            with phase(cast(PhaseName, name)):
                time.sleep(float(seconds))
        if how.startswith("progress:"):
            self._progress(ctx.adaptation_dir, int(how.split(":", 1)[1]))
        if how == "spam":
            for i in range(20000):
                print(f"spam line {i} " + "x" * 80)
        if how != "lie" and not how.startswith("figures_lie:"):
            self._evidence(ctx).write_text(f"{ctx.model.model_id}:{self.name}")
        proposed = (
            [FigureSet({"speedup": float(how.split(":", 1)[1])}, units={"speedup": "x"})]
            if how.startswith("figures")
            else []
        )
        fields: dict[str, str] = {"architecture": "ToyForCausalLM", "model_type": "toy"} if how == "meta" else {}
        if how.startswith("family:"):  # what discovery learns: the task family the cost model ranks by
            fields = {"task_family": how.split(":", 1)[1]}
        return StageOutcome(
            "done",
            f"toy {self.name} done",
            result={"stage": self.name},
            model_fields=fields,
            model_metadata={"toy": True} if how == "meta" else None,
            fix_applied="toy-fix" if how == "meta" else None,
            metrics=proposed,
        )

    @staticmethod
    def _progress(directory: Path, steps: int) -> None:
        """`steps` steps of a phase, a line each (no rate limit), then a last step that waits for `release`."""
        with Progress("toy work", total=steps + 1, every_s=0.0) as progress:
            for _ in range(steps):
                progress.advance(note="working")
            deadline = time.monotonic() + 60
            while not (directory / "release").exists() and time.monotonic() < deadline:
                time.sleep(0.05)
            progress.advance()

    @staticmethod
    def _killed(rises: bool) -> StageOutcome:
        """A contained command killed by SIGKILL; the OOM-kill counter (this worker's stand-in) rises
        by one at each look when `rises`, else stays put."""
        counts = itertools.count()
        oom.oom_kill_count = (lambda: next(counts)) if rises else (lambda: 0)  # type: ignore[assignment]  # the stand-in
        died = run_command([sys.executable, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGKILL)"])
        summary = f"toy run died: exit {died.exit_code}"
        return StageOutcome("failed", summary, diagnosis={"rule": "toy_failure", "summary": summary})

    def gate(self, ctx: StageContext) -> GateResult:
        how = self._behaviour(ctx)
        if how.startswith("inconclusive:"):
            looks = ctx.adaptation_dir / "gate.looks"
            with looks.open("a") as fh:
                fh.write("gate\n")
            seen = len(looks.read_text().splitlines())
            if seen <= int(how.split(":", 1)[1]):
                return GateResult(
                    False, f"re-timing too noisy to decide (look {seen})", {"looks": seen}, inconclusive=True
                )
        path = self._evidence(ctx)
        ok = path.exists() and path.read_text() == f"{ctx.model.model_id}:{self.name}"
        ctx.say(f"toy gate {self.name}: {'pass' if ok else 'fail'}")
        return GateResult(ok, "evidence matches" if ok else f"{path.name} missing or wrong", {"file": str(path)})


DISCOVERY = ToyStage("discovery")
ADAPTATION = ToyStage("adaptation")
HEALING = ToyStage("healing")
BENCHMARK = ToyStage("benchmark")
OPTIMIZATION = ToyStage("optimization")
BUSINESS = ToyStage("business_benchmark")

ALL = (
    "discovery=tests.teamlead.toy_stages:DISCOVERY,adaptation=tests.teamlead.toy_stages:ADAPTATION,"
    "healing=tests.teamlead.toy_stages:HEALING,benchmark=tests.teamlead.toy_stages:BENCHMARK,"
    "optimization=tests.teamlead.toy_stages:OPTIMIZATION"
)
WITH_BUSINESS = ALL + ",business_benchmark=tests.teamlead.toy_stages:BUSINESS"
