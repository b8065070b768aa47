"""The server's containment, with a stand-in server that answers /health and starts a child of its
own (as vLLM's API server starts its engine core): nothing survives the block, a start timeout, or
a SIGKILL of the process that started it."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from ascendbridge.workers.containment import ATTEMPT_ENV, AttemptMarker, attempt_processes, kill_attempt
from serving.server import ServerError, free_port, served

REPO = Path(__file__).resolve().parents[2]
STAND_IN = """
import http.server, subprocess, sys
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
open(sys.argv[2], "w").write(str(child.pid))
class Health(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200 if self.path == "/health" and sys.argv[3] == "healthy" else 503)
        self.end_headers()
    def log_message(self, *args):
        pass
http.server.HTTPServer(("127.0.0.1", int(sys.argv[1])), Health).serve_forever()
"""


def stand_in(tmp_path: Path, port: int, health: str = "healthy") -> list[str]:
    script = tmp_path / "stand_in.py"
    script.write_text(STAND_IN)
    return [sys.executable, str(script), str(port), str(tmp_path / "child.pid"), health]


def gone(pid: int, within_s: float = 10.0) -> bool:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                return True
        except psutil.NoSuchProcess:
            return True
        time.sleep(0.1)
    return False


def test_the_server_and_its_children_are_gone_after_the_block(tmp_path: Path) -> None:
    port = free_port()
    with served(stand_in(tmp_path, port), tmp_path, {}, port, 60, tmp_path / "server.log") as server:
        child = int((tmp_path / "child.pid").read_text())
        assert psutil.pid_exists(server.pid) and psutil.pid_exists(child) and server.cold_start_s > 0
        assert os.getpgid(child) == server.pid != os.getpgid(0)  # one group of its own, server and child
    assert gone(server.pid) and gone(child)


def test_a_server_that_never_gets_healthy_is_stopped_at_the_start_timeout(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """... and its start, waited on, said so: started, then stopped by the timeout's error."""
    port = free_port()
    started = time.monotonic()
    with pytest.raises(ServerError, match="no /health within 3 s"):
        with served(stand_in(tmp_path, port, "unhealthy"), tmp_path, {}, port, 3, tmp_path / "server.log"):
            pass
    assert time.monotonic() - started < 30
    assert gone(int((tmp_path / "child.pid").read_text()))
    lines = [line for line in capsys.readouterr().err.splitlines() if line.startswith("progress: engine start")]
    assert lines[0] == "progress: engine start (until /health answers, at most 3 s): started"
    assert re.fullmatch(r"progress: engine start \(.*\): elapsed \d+s, stopped \(ServerError\)( \(.*\))?", lines[-1])


CRASHING = """
import sys
print("(APIServer pid=1) WARNING 12-05 08:44:02 [system_utils.py:255] fd limit errors like `OSError: [Errno 24]`")
print("(Worker pid=2) ERROR 12-05 08:44:34 [multiproc_executor.py:953] Traceback (most recent call last):")
print("(Worker pid=2) ERROR 12-05 08:44:34 [multiproc_executor.py:953] KeyError: 'factor'")
for i in range(40):
    print(f'  File "engine.py", line {i}, in launch')
print("RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}")
sys.exit(1)
"""


def test_a_server_that_dies_names_the_root_cause_its_log_gives_above_the_last_lines(tmp_path: Path) -> None:
    """vLLM ends on "See root cause above": the one-line error carries the worker's exception."""
    script = tmp_path / "crashing.py"
    script.write_text(CRASHING)
    with pytest.raises(ServerError) as raised:
        with served([sys.executable, str(script)], tmp_path, {}, free_port(), 60, tmp_path / "server.log"):
            pass
    message = str(raised.value)
    assert message.startswith("the server exited (1) before /health answered: root cause: KeyError: 'factor' | ")
    assert message.endswith("See root cause above. Failed core proc(s): {}") and "OSError" not in message


WORKER = """
import sys, time
from pathlib import Path
from serving.server import served
port = int(sys.argv[1]); tmp = Path(sys.argv[2])
argv = [sys.executable, str(tmp / "stand_in.py"), str(port), str(tmp / "child.pid"), "healthy"]
with served(argv, tmp, {}, port, 60, tmp / "server.log") as server:
    print(server.pid, flush=True)
    time.sleep(600)
"""


def test_a_sigkilled_starter_takes_the_server_and_the_attempt_sweep_finds_the_rest(tmp_path: Path) -> None:
    port = free_port()
    stand_in(tmp_path, port)
    marker = AttemptMarker(999_001, 1, str(tmp_path / "board.db"))
    worker = subprocess.Popen(
        [sys.executable, "-c", WORKER, str(port), str(tmp_path)],
        cwd=REPO,
        env={**os.environ, ATTEMPT_ENV: str(marker)},
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert worker.stdout is not None
        server = int(worker.stdout.readline())
        child = int((tmp_path / "child.pid").read_text())
        assert {server, child} <= {p.pid for p in attempt_processes(marker)}  # both carry the attempt's marker
        worker.send_signal(signal.SIGKILL)  # as when the team lead (and so its worker) is SIGKILLed
        worker.wait()
        assert gone(server)  # the kernel's parent-death signal
        kill_attempt(marker)  # what the worker's SIGTERM handler, or the next team lead's sweep, does
        assert gone(child) and not attempt_processes(marker)
    finally:
        kill_attempt(marker)
        worker.kill()
