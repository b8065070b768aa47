"""Toy stages for device-placement tests: what each job was given, seen from inside the job.

A timed toy starts a child process (as a model run would), reads that child's
/proc/<pid>/status Cpus_allowed_list, and appends one JSON line per run to $TOY_DEVICE_RECORD with
the visible-device variables of its environment; then it sleeps, so a scheduler that let two
timed runs share a device would be caught overlapping. The toy discovery proposes a device plan
when the model's description asks for one ({"plan_devices": N}), as real discovery does for a
model larger than one device.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import time
from pathlib import Path

from ascendbridge.stage_api import StageContext, StageOutcome
from tests.teamlead.toy_stages import ToyStage

RECORD_ENV = "TOY_DEVICE_RECORD"
VARS = ("ASCEND_RT_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES", "ASCENDBRIDGE_NPU_INDEX", "ASCENDBRIDGE_CPU_AFFINITY")


def _allowed_cpus(pid: int) -> str:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("Cpus_allowed_list:"):
            return line.split(":", 1)[1].strip()
    return ""


class RecordingStage(ToyStage):
    def __init__(self, name: str, sleep_s: float) -> None:
        super().__init__(name)
        self.sleep_s = sleep_s

    def run(self, ctx: StageContext) -> StageOutcome:
        started = time.time()
        child = subprocess.Popen(["sleep", "60"])
        try:
            child_cpus = _allowed_cpus(child.pid)
        finally:
            child.kill()
            child.wait()
        time.sleep(self.sleep_s)
        line = {
            "model": ctx.model.model_id,
            "stage": self.name,
            "attempt": ctx.attempt,
            "env": {k: os.environ.get(k) for k in VARS},
            "child_cpus": child_cpus,
            "started": started,
            "ended": time.time(),
        }
        with open(os.environ[RECORD_ENV], "a", encoding="utf-8") as fh:
            fh.write(json.dumps(line) + "\n")
        return super().run(ctx)


class PlanningDiscovery(RecordingStage):
    def run(self, ctx: StageContext) -> StageOutcome:
        out = super().run(ctx)
        devices = json.loads(ctx.model.description or "{}").get("plan_devices")
        if devices:
            out = dataclasses.replace(out, model_metadata={"decision": {"plan": {"devices": devices}}})
        return out


DISCOVERY = PlanningDiscovery("discovery", 0.0)
BENCHMARK = RecordingStage("benchmark", 0.4)
BUSINESS = RecordingStage("business_benchmark", 0.4)

STAGES = (
    "discovery=tests.teamlead.toy_device_stages:DISCOVERY,benchmark=tests.teamlead.toy_device_stages:BENCHMARK,"
    "business_benchmark=tests.teamlead.toy_device_stages:BUSINESS"
)
