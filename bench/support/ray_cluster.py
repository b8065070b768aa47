"""A real Ray cluster on this machine for tests and bench/scaling_bench.py: a head and more nodes,
each a `ray start --block` process of its own, so one node can be killed (a host dying) and
teardown ends exactly the processes this helper started (never a machine-wide `ray stop`).

Sized for a small shared machine: few CPUs per node, a small object store, no dashboard, no log
monitor, no prestarted workers (Ray's start-up waits 30 s for a node's agents: on a loaded 2-core
machine every process less at start matters), and a long registration timeout for Ray's worker
processes (its 60 s default kills workers that a loaded machine starts slowly, over and over). Fake
accelerators come from `--resources '{"NPU": n}'`: Ray treats NPU as an accelerator resource,
hands each task its own NPU index and sets ASCEND_RT_VISIBLE_DEVICES to it.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

RAY = Path(sys.executable).with_name("ray")
STARTED = "Ray runtime started"
OBJECT_STORE_BYTES = 80 * 1024 * 1024


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class LocalRayCluster:
    """Nodes started with `ray start --block`; `kill_node` SIGKILLs one node's whole process tree."""

    def __init__(self, npus_per_node: int = 2, cpus_per_node: int = 2) -> None:
        if not RAY.exists():
            raise RuntimeError(f"{RAY} missing: the ray extra is not installed (uv sync --extra ray)")
        self.npus, self.cpus = npus_per_node, cpus_per_node
        self.root = Path(tempfile.mkdtemp(prefix="abray-", dir="/tmp"))  # Ray's socket paths must stay short
        self.port = _free_port()
        self.address = f"127.0.0.1:{self.port}"
        self.nodes: list[subprocess.Popen[bytes]] = []
        (self.root / "tmp").mkdir()  # the nodes' scratch folders: a killed node's go with the cluster
        self.env = dict(
            os.environ,
            RAY_USAGE_STATS_ENABLED="0",
            TMPDIR=str(self.root / "tmp"),
            RAY_agent_register_timeout_ms="120000",
            RAY_enable_worker_prestart="0",
            RAY_worker_register_timeout_seconds="600",
        )

    def _start(self, head: bool, timeout_s: float) -> subprocess.Popen[bytes]:
        """One node; a start that times out is tried once more (on a loaded machine Ray's own
        start-up wait, 30 s for its agents, can run out; the second try finds the imports cached)."""
        try:
            return self._start_once(head, timeout_s)
        except RuntimeError:
            self.kill_node(len(self.nodes) - 1)
            self.nodes.pop()
            return self._start_once(head, timeout_s)

    def _start_once(self, head: bool, timeout_s: float) -> subprocess.Popen[bytes]:
        index = len(self.nodes)
        where = (
            ["--head", "--port", str(self.port), "--include-dashboard", "false"]
            if head
            else ["--address", self.address]
        )
        argv = [
            str(RAY),
            "start",
            *where,
            "--block",
            "--disable-usage-stats",
            "--include-log-monitor",
            "false",
            "--node-ip-address",
            "127.0.0.1",
            "--num-cpus",
            str(self.cpus),
            *(["--resources", json.dumps({"NPU": self.npus})] if self.npus else []),
            "--object-store-memory",
            str(OBJECT_STORE_BYTES),
            "--temp-dir",
            str(self.root / f"n{index}"),
        ]
        log = self.root / f"node{index}.log"
        with log.open("wb") as out:
            proc = subprocess.Popen(argv, env=self.env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        self.nodes.append(proc)
        deadline = time.monotonic() + timeout_s
        while STARTED not in log.read_text(errors="replace"):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"ray node {index} did not start: {log.read_text(errors='replace')[-1500:]}")
            time.sleep(0.3)
        return proc

    def start(self, nodes: int = 2, timeout_s: float = 120.0) -> LocalRayCluster:
        try:
            self._start(True, timeout_s)
            for _ in range(nodes - 1):
                self._start(False, timeout_s)
        except BaseException:
            self.stop()
            raise
        return self

    def tree(self, index: int) -> list[psutil.Process]:
        """Node `index`'s `ray start` process and everything under it (raylet, its Ray workers, ours)."""
        try:
            top = psutil.Process(self.nodes[index].pid)
            return [top, *top.children(recursive=True)]
        except psutil.NoSuchProcess:
            return []

    def kill_node(self, index: int) -> None:
        """The host dies: SIGKILL every process of that node at once."""
        for proc in self.tree(index):
            try:
                proc.send_signal(signal.SIGKILL)
            except psutil.NoSuchProcess:
                pass
        self.nodes[index].wait(30)

    def stop(self) -> None:
        """SIGTERM each `ray start --block` (it stops its node's processes), then SIGKILL what is left."""
        trees = [self.tree(i) for i in range(len(self.nodes))]
        for proc in reversed(self.nodes):
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in reversed(self.nodes):
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                pass
        for tree in trees:
            for member in tree:
                try:
                    member.kill()
                except psutil.NoSuchProcess:
                    pass
        subprocess.run(["rm", "-rf", str(self.root)], check=False)

    def alive_processes(self) -> list[int]:
        """Processes of this cluster still running (teardown checks there are none)."""
        out = []
        for proc in psutil.process_iter(["cmdline"]):
            try:
                if any(str(self.root) in part for part in proc.info["cmdline"] or []):
                    out.append(proc.pid)
            except psutil.Error:
                continue
        return out

    def __enter__(self) -> LocalRayCluster:
        return self

    def __exit__(self, *exc: object) -> bool | None:
        self.stop()
        return None
