"""The Ray executor: each claimed task's run and gate as one Ray task, on any host of a Ray cluster.

Same interface as the local executor (ascendbridge.workers.executor); the team lead is unchanged
and stays the single writer of the board. What crosses to a node: the Job (with the task and
model records the team lead claimed) and the attempt's staging copy packed with its sha256
(ascendbridge.workers.artefact). On the node a LocalProcessExecutor runs the usual worker
subprocesses in a scratch folder; workers never open the board anywhere, and the team lead keeps
the lease. What comes back: the run's outcome, the gate's verdict (validated models), the attempt
log and the packed result directory, which the head checks and unpacks into its staging copy
before the team lead gates and promotes.

Resources: timed stages ask for one accelerator of the kind the cluster has ({"NPU": 1} when
Ray found Ascend NPUs, {"GPU": 1} for CUDA), so Ray never runs two on one device and sets
ASCEND_RT_VISIBLE_DEVICES / CUDA_VISIBLE_DEVICES for the task; everything else asks for one CPU.
Ray's own retries are off: a host that dies mid-task comes back as `lost`, the team lead
releases the task (pending again, counted as an interruption) and the next claim, with a new
fencing token, runs it wherever there is room.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import shutil
import socket
import tempfile
import time
from pathlib import Path
from typing import Any

from ascendbridge.workers import attempt_dir, payload
from ascendbridge.workers.artefact import Artefact, ArtefactError, pack, unpack
from ascendbridge.workers.devices import Device, HostInventory
from ascendbridge.workers.executor import Executor, Job, JobResult, LocalProcessExecutor, PhaseResult
from ascendbridge.workers.placement import stage_resources

RAY_MISSING = "the Ray executor needs the ray extra: run `uv sync --extra ray` (or pip install 'ray>=2.60')"

KIND_OF = {"NPU": "npu", "GPU": "cuda"}  # Ray's accelerator resource names -> the device layer's kinds

# Head-side paths the node must not inherit; every other ASCENDBRIDGE_* setting travels with the job.
HEAD_ONLY_ENV = frozenset({"ASCENDBRIDGE_BOARD", "ASCENDBRIDGE_LOGS", "ASCENDBRIDGE_ADAPTATIONS"})
VISIBLE_DEVICE_ENV = ("ASCEND_RT_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES")


class RayUnavailable(RuntimeError):
    """Ray is not installed or the cluster cannot be reached; the message is one line for the user."""


def cluster_accelerator(resources: dict[str, float]) -> str | None:
    """The accelerator kind the cluster offers (Ray detects NPUs and GPUs), or None on CPU only."""
    return next((name for name in KIND_OF if resources.get(name, 0) >= 1), None)


def cluster_inventory(resources: dict[str, float]) -> HostInventory:
    """The whole cluster as one pool: its accelerators (or its CPUs) bound how many timed tasks
    the team lead has in flight; Ray itself decides which node and card each one gets."""
    accelerator = cluster_accelerator(resources)
    if accelerator is None:
        return HostInventory("ray-cluster", "cpu", (), tuple(range(int(resources.get("CPU", 1)))), source="ray")
    kind = KIND_OF[accelerator]
    devices = tuple(Device(kind, i) for i in range(int(resources[accelerator])))
    return HostInventory("ray-cluster", kind, devices, tuple(range(int(resources.get("CPU", 1)))), source="ray")


def task_options(resources: dict[str, float]) -> dict[str, Any]:
    """`.options()` of the Ray task for these resources; no Ray retry (the team lead owns retries);
    spread over the hosts (each task is a whole model run, not a small function to pack)."""
    custom = {k: v for k, v in resources.items() if k not in ("CPU", "GPU")}
    return {
        "num_cpus": resources.get("CPU", 0.0),
        "num_gpus": resources.get("GPU", 0.0),
        "resources": custom,
        "max_retries": 0,
        "scheduling_strategy": "SPREAD",
    }


def forwarded_env(environ: dict[str, str] | None = None) -> dict[str, str]:
    """The environment a node's worker needs (stage registry, model-run variables, PYTHONPATH); its
    settings travel with the job (ascendbridge.settings payload)."""
    env = os.environ if environ is None else environ
    return {
        k: v for k, v in env.items() if (k.startswith("ASCENDBRIDGE_") and k not in HEAD_ONLY_ENV) or k == "PYTHONPATH"
    }


def check_reachable(address: str, timeout_s: float = 5.0) -> None:
    """Fail in seconds on a host:port nobody listens on: ray.init itself retries for minutes."""
    host, sep, port = address.removeprefix("ray://").rpartition(":")
    if not sep or not port.isdigit():
        if address == "auto":
            return
        raise RayUnavailable(f"--ray-address '{address}' is not host:port (or auto)")
    try:
        socket.create_connection((host or "127.0.0.1", int(port)), timeout=timeout_s).close()
    except OSError as exc:
        raise RayUnavailable(f"cannot reach the Ray cluster at {address}: {exc.strerror or exc}") from None


@dataclasses.dataclass
class NodeReport:
    """What a Ray task sends back to the head."""

    run: PhaseResult | None
    gate: PhaseResult | None
    stopped: bool
    duration_s: float
    work_dir: str  # the node's staging copy: paths in the results point into it
    artefact: Artefact | None  # the staging copy after the run and gate
    log_text: str
    placement: dict[str, Any]
    phases: dict[str, float] = dataclasses.field(default_factory=dict)  # the node executor's own (staging)


def run_on_node(job: Job, artefact: Artefact) -> NodeReport:
    """Body of the Ray task: the job's run and gate in a scratch folder of this node."""
    import ray

    context = ray.get_runtime_context()
    devices = {k: v for k, v in context.get_accelerator_ids().items() if v}
    placement: dict[str, Any] = {
        "host": socket.gethostname(),
        "node_id": context.get_node_id(),
        "devices": devices,
        "visible_devices": {k: os.environ[k] for k in VISIBLE_DEVICE_ENV if k in os.environ},
        "worker": job.worker_id,
        "pid": os.getpid(),
        "started": time.time(),
    }
    root = Path(tempfile.mkdtemp(prefix=f"ascendbridge-ray-{job.task.id}-{job.token}-"))
    try:
        live = root / "adaptations" / job.adaptation_dir.name
        node_job = dataclasses.replace(
            job,
            adaptation_dir=live,
            board_path=root / "board-not-on-this-host.db",
            log_path=root / "logs" / job.log_path.name,
        )
        unpack(artefact, node_job.work_dir if job.gate_only else live)  # a re-check gates the staging copy itself
        local = LocalProcessExecutor()
        local.submit(node_job)
        done: list[JobResult] = []
        try:
            while not done:
                done = local.collect(1.0)
        except KeyboardInterrupt:  # ray.cancel(): stop the worker and everything it started
            local.stop()
            done = local.collect(60.0)
        result = done[0]
        placement["ended"] = time.time()
        log_text = node_job.log_path.read_text(errors="replace") if node_job.log_path.exists() else ""
        packed = pack(node_job.work_dir) if node_job.work_dir.is_dir() else None
        return NodeReport(
            result.run,
            result.gate,
            result.stopped,
            result.duration_s,
            str(node_job.work_dir),
            packed,
            log_text,
            placement,
            result.phases,
        )
    finally:
        shutil.rmtree(root, ignore_errors=True)


class RayExecutor(Executor):
    """Submits each job as a Ray task with its stage's resources; collects finished ones."""

    def __init__(self, address: str | None = None) -> None:
        if address:
            check_reachable(address)
        # The team lead runs under `uv run` (run_auto_team_lead.sh); Ray's uv hook would then start
        # every Ray worker through `uv run` of the driver's command line, which breaks the worker
        # start-up. The nodes already run the framework env (`ray start` from it): turn the hook off
        # (read when ray is imported).
        os.environ.setdefault("RAY_ENABLE_UV_RUN_RUNTIME_ENV", "0")
        try:
            import ray
        except ImportError:
            raise RayUnavailable(RAY_MISSING) from None
        self._ray = ray
        where = address or "a new local Ray instance"
        try:
            ray.init(address=address, logging_level=logging.ERROR, log_to_driver=False, configure_logging=True)
        except (ConnectionError, RuntimeError, ValueError) as exc:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise RayUnavailable(f"cannot reach the Ray cluster at {where}: {first}") from None
        self.accelerator = cluster_accelerator(ray.cluster_resources())
        self._remote = ray.remote(run_on_node)
        self._refs: dict[Any, Job] = {}  # Ray object ref -> job
        self._cancelled: set[Any] = set()  # refs cancelled because their lease was lost
        self._env = forwarded_env()
        self._stopping = False

    def submit(self, job: Job) -> None:
        job.log_path.parent.mkdir(parents=True, exist_ok=True)
        if not job.gate_only:  # a gate re-check sends the attempt's kept staging copy as it is
            attempt_dir.prepare(job.adaptation_dir, job.stage, job.token)
        # The head's placement (cores, card index) means nothing on another node: Ray assigns them there.
        sent = dataclasses.replace(job, env={**self._env, **job.env}, placement=None)
        count = len(job.placement.devices) if job.placement is not None and job.placement.devices else 1
        kind = KIND_OF.get(self.accelerator or "", "cpu")
        options = task_options(stage_resources(job.stage, kind, count))
        ref = self._remote.options(**options).remote(sent, pack(job.work_dir))
        self._refs[ref] = job

    def inventory(self) -> HostInventory:
        return cluster_inventory(self._ray.cluster_resources())

    def in_flight(self) -> int:
        return len(self._refs)

    def collect(self, timeout_s: float) -> list[JobResult]:
        if not self._refs:
            time.sleep(max(timeout_s, 0.0))
            return []
        refs = list(self._refs)
        ready, rest = self._ray.wait(refs, num_returns=1, timeout=max(timeout_s, 0.0))
        if ready and rest:
            more, _ = self._ray.wait(rest, num_returns=len(rest), timeout=0)
            ready += more
        return [self._result(self._refs.pop(ref), ref) for ref in ready]

    def cancel(self, job: Job) -> None:
        for ref, running in self._refs.items():
            if running is job:
                self._cancelled.add(ref)
                self._ray.cancel(ref, force=True)

    def stop(self) -> None:
        self._stopping = True
        for ref in list(self._refs):
            self._ray.cancel(ref, force=True)

    def close(self) -> None:
        self._ray.shutdown()

    def _result(self, job: Job, ref: Any) -> JobResult:
        exceptions = self._ray.exceptions
        if ref in self._cancelled:  # its lease was lost: an attempt without an outcome, the team lead fences it
            self._cancelled.discard(ref)
            return JobResult(
                job, run=PhaseResult(None, 0.0, False, None, "cancelled: its lease was lost"), stopped=self._stopping
            )
        try:
            report: NodeReport = self._ray.get(ref)
        except exceptions.RayTaskError as exc:  # our own code raised on the node: a crash of this attempt
            return JobResult(
                job, run=PhaseResult(None, 0.0, False, None, f"Ray task error: {exc}"[-2000:]), stopped=self._stopping
            )
        except exceptions.RayError as exc:  # the worker or its host is gone (or we cancelled it)
            if self._stopping:
                return JobResult(job, stopped=True)
            return JobResult(job, lost=f"{type(exc).__name__}: {_first_line(exc)}")
        _append(job.log_path, report.log_text)
        result = JobResult(
            job,
            stopped=report.stopped or self._stopping,
            duration_s=report.duration_s,
            placement=report.placement,
            phases=report.phases,
        )
        try:
            if report.artefact is not None:
                unpack(report.artefact, job.work_dir)
        except ArtefactError as exc:
            result.run = PhaseResult(None, report.duration_s, False, None, str(exc))
            return result
        node_dir = Path(report.work_dir)
        result.run = _relocated(report.run, node_dir, job.work_dir)
        result.gate = _relocated(report.gate, node_dir, job.work_dir)
        return result


def _relocated(phase: PhaseResult[Any] | None, node_dir: Path, head_dir: Path) -> PhaseResult[Any] | None:
    """A phase result whose paths point at the head's staging copy instead of the node's."""
    if phase is None or phase.data is None:
        return phase
    moved = attempt_dir.relocate(payload.to_data(phase.data), node_dir, head_dir)
    return dataclasses.replace(phase, data=payload.from_data(type(phase.data), moved, "a relocated result"))


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0][:300] if text else type(exc).__name__


def _append(path: Path, text: str) -> None:
    if text:
        with path.open("a", encoding="utf-8") as fh:
            fh.write(text)
