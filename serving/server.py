"""Start the engine's server contained, wait for /health within a bound, and always stop it.

The server leads its own process group (the API server, its engine core and workers are one
group, killed together) and carries the attempt's and its own command marker in its environment,
so the team lead's sweeps find it even after it left the attempt's group; the kernel sends it
SIGKILL when the process that started it dies (a team lead SIGKILLed mid-attempt takes its worker,
and the worker's death takes the server). Nothing is left running when `served` exits.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import threading
import time
import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import psutil

from ab_runtime.phases import add
from ab_runtime.progress import Progress
from ascendbridge.workers.containment import ATTEMPT_ENV, COMMAND_ENV, command_processes, die_with_parent, terminate
from ascendbridge.workers.process import kill_group

HEALTH_POLL_S = 0.5
MEMORY_POLL_S = 0.25
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")


class ServerError(RuntimeError):
    """The server did not become healthy (exited, or not within the start timeout)."""


class MemoryWatch:
    """The peak resident memory of a process tree (the API server, its engine core and workers),
    sampled every MEMORY_POLL_S from start to stop."""

    def __init__(self, pid: int) -> None:
        self.peak_bytes = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(pid,), daemon=True)
        self._thread.start()

    def _run(self, pid: int) -> None:
        while not self._stop.is_set():
            try:
                root = psutil.Process(pid)
                tree = [root, *root.children(recursive=True)]
            except psutil.Error:
                return
            total = 0
            for proc in tree:
                try:
                    total += proc.memory_info().rss
                except psutil.Error:
                    continue
            self.peak_bytes = max(self.peak_bytes, total)
            self._stop.wait(MEMORY_POLL_S)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


@dataclass
class Server:
    url: str
    pid: int
    command_id: str
    cold_start_s: float
    log: Path
    memory: MemoryWatch | None = field(default=None, repr=False)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def loopback_client(timeout_s: float) -> httpx.Client:
    """An HTTP client for the server on 127.0.0.1 that never goes through a proxy: a host's
    `http_proxy` without `no_proxy` (the usual corporate default) would send loopback requests
    to the proxy. Hub and package traffic elsewhere keep honouring the proxy variables."""
    return httpx.Client(trust_env=False, timeout=timeout_s)


def loopback_env(env: Mapping[str, str]) -> dict[str, str]:
    """`env` with the loopback hosts added to `no_proxy` / `NO_PROXY`, for the engine's own
    processes (its server, `vllm bench serve`'s aiohttp client) that read the proxy variables."""
    out = dict(env)
    for key in ("no_proxy", "NO_PROXY"):
        have = [h.strip() for h in out.get(key, "").split(",") if h.strip()]
        out[key] = ",".join([*have, *(h for h in LOOPBACK_HOSTS if h not in have)])
    return out


def healthy(url: str, timeout_s: float = 2.0) -> bool:
    try:
        with loopback_client(timeout_s) as client:
            return client.get(f"{url}/health").status_code == 200
    except httpx.HTTPError:
        return False


# An exception line, bare or behind vLLM's log prefix: `(Worker pid=7) ERROR 12-05 08:44:34 [file.py:953] KeyError: 'factor'`.
_EXCEPTION_LINE = re.compile(
    r"^(?:\(\w+ pid=\d+\) )?(?:ERROR \S+ \S+ \[[^]]+\] )?((?:\w+\.)*\w*(?:Error|Exception)\b.*)$"
)


def _tail(path: Path, lines: int = 5) -> str:
    """The log's last lines; led by the root cause when the log names one above them. vLLM's server
    ends on `RuntimeError: Engine core initialization failed. See root cause above.`: the cause (a
    worker's exception, e.g. a config key its model code needs) is a hundred lines up."""
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return ""
    kept = [line.strip()[:300] for line in text.splitlines() if line.strip()]
    causes = [m.group(1) for line in kept if (m := _EXCEPTION_LINE.match(line)) and "root cause above" not in line]
    tail = kept[-lines:]
    if causes and not any(causes[-1] in line for line in tail):
        return " | ".join([f"root cause: {causes[-1]}", *tail[-2:]])
    return " | ".join(tail)


def _preexec() -> None:
    die_with_parent(signal.SIGKILL)


@contextmanager
def served(
    argv: list[str], cwd: Path, env: dict[str, str], port: int, start_timeout_s: float, log: Path
) -> Iterator[Server]:
    """Run `argv` (a server listening on 127.0.0.1:`port`) until the block ends; ServerError when it
    exits or is not healthy within `start_timeout_s` (its log's last lines in the message)."""
    command_id = uuid.uuid4().hex
    child_env = {**loopback_env({**os.environ, **env}), COMMAND_ENV: command_id}
    if ATTEMPT_ENV in os.environ:
        child_env[ATTEMPT_ENV] = os.environ[ATTEMPT_ENV]
    url = f"http://127.0.0.1:{port}"
    with open(log, "ab") as out:
        started = time.monotonic()
        proc = subprocess.Popen(
            argv,
            cwd=str(cwd),
            env=child_env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=_preexec,
        )
    memory = MemoryWatch(proc.pid)
    try:
        with Progress(f"engine start (until /health answers, at most {start_timeout_s:.0f} s)", unit="") as progress:
            while not healthy(url):
                if proc.poll() is not None:
                    raise ServerError(f"the server exited ({proc.returncode}) before /health answered: {_tail(log)}")
                if time.monotonic() - started > start_timeout_s:
                    raise ServerError(f"no /health within {start_timeout_s:.0f} s: {_tail(log)}")
                time.sleep(HEALTH_POLL_S)
                progress.advance(0, note=f"server log: {_tail(log, 1)}" if progress.due() else "")
        cold_start_s = time.monotonic() - started
        add("server_start", cold_start_s)
        yield Server(url, proc.pid, command_id, cold_start_s, log, memory)
    finally:
        memory.stop()
        kill_group(proc.pid, leader=proc)
        proc.wait()
        terminate(command_processes(command_id), 0.0)  # anything that left the group
