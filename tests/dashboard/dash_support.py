"""Dashboard test support: a seeded board on disk and a real dashboard server on a loopback port.

The server is the real start command (`python -m dashboard`) in a subprocess, so tests cross a
socket, uvicorn and the ASGI stack exactly as a browser does. One server per test module keeps
the area fast; tests use their own models so they do not depend on each other's writes.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx

from ascendbridge.board import AttemptEnd, AttemptStart, BoardStore, Registration

REPO = Path(__file__).resolve().parents[2]
TOKEN = "test-token-0123456789abcdef"
HEALTHZ_WAIT_S = 120.0  # a generous bound: a loaded 2-core machine took over 30 s to start uvicorn
XSS_ID = "xss-org/payload-model"
XSS_DESCRIPTION = '<script>window.__pwned = 1</script><img src=x onerror="window.__pwned = 2">"quoted" & more'


@dataclass
class Site:
    url: str
    token: str
    root: Path
    board_path: Path
    logs: Path
    adaptations: Path

    def store(self) -> BoardStore:
        return BoardStore(self.board_path)

    def client(self) -> httpx.Client:
        return httpx.Client(base_url=self.url, timeout=10)

    def auth(self) -> dict[str, str]:
        return {"X-AscendBridge-Token": self.token}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def measured_pass(name: str, kept: bool, reason: str, speedup: float, interval: list[float]) -> dict[str, object]:
    """One measured pass of optimization_notes.json, its accuracy check passed."""
    paired = {"speedup": speedup, "interval": interval}
    return {
        "name": name,
        "measured": True,
        "kept": kept,
        "reason": reason,
        "paired": paired,
        "accuracy": {"verdict": "pass"},
    }


def seed_board(root: Path) -> tuple[Path, Path, Path]:
    """A board with models in several states, attempts with logs, metrics and evidence files."""
    board_path, logs, adaptations = root / "board.db", root / "logs", root / "adaptations"
    logs.mkdir()
    adaptations.mkdir()
    store = BoardStore.init(board_path)
    try:
        store.register_models(
            [
                Registration(model_id="acme/llama-tiny", description="causal LM for the demo", priority=9),
                Registration(model_id="acme/bert-mini", description="encoder with a broken config", priority=5),
                Registration(model_id=XSS_ID, description=XSS_DESCRIPTION, priority=1),
                *[
                    Registration(model_id=f"bulk/model-{i:03d}", description=f"bulk model number {i}")
                    for i in range(60)
                ],
            ]
        )
        store.update_model_metadata(
            "acme/llama-tiny", {"task_family": "causal_lm", "architecture": "LlamaForCausalLM"}, {"layers": 2}
        )
        store.update_model_metadata("acme/bert-mini", {"task_family": "masked_lm"}, {})
        store.register_agent("team-lead-test", "team-lead")
        # llama: discovery completed after one attempt with a log inside the logs dir.
        task = store.claim_task(store.list_tasks("discovery", model_id="acme/llama-tiny")[0].id, "team-lead-test", 60)
        log = logs / "llama-discovery-1.log"
        log.write_text("loading config\n<b>not bold</b>\nall good\n")
        attempt = store.start_attempt(
            task.id, task.fencing_token, AttemptStart("get_model_info.py acme/llama-tiny", str(log))
        )
        spent = {"model_load": 1.5, "gate": 0.75, "other": 0.25}  # where its 2.5 s went
        store.finish_attempt(attempt, AttemptEnd("passed", 0, 2.5, cost_profile=spent, peak_rss_bytes=300 * 2**20))
        store.complete_task(task.id, task.fencing_token, {"files": 3}, figures=[{"values": {"speedup": 2.5}}])
        # bert: discovery failed; its attempt's log_path points outside the logs dir.
        task = store.claim_task(store.list_tasks("discovery", model_id="acme/bert-mini")[0].id, "team-lead-test", 60)
        attempt = store.start_attempt(
            task.id, task.fencing_token, AttemptStart("get_model_info.py acme/bert-mini", "/etc/passwd")
        )
        # Its run proposed a speedup the gate never passed: kept in the attempt, labelled unverified.
        failed = {
            "summary": "corrupt config.json: unterminated string",
            "unverified": {"metrics": [{"values": {"speedup": 1.2}}]},
        }
        store.finish_attempt(attempt, AttemptEnd("failed", 1, 0.7, failed))
        store.fail_task(task.id, task.fencing_token, failed)
    finally:
        store.close()
    adapt = adaptations / "acme__llama-tiny"
    adapt.mkdir()
    # Evidence in the stages' formats (ascendbridge.benchmark_metrics/1, ab_runtime.optimize notes).
    (adapt / "benchmark_metrics_cpu_bf16_random_synthetic.json").write_text(
        json.dumps(
            {
                "schema": "ascendbridge.benchmark_metrics/1",
                "run": {"device": "cpu", "dtype": "bf16", "mode": "random", "dataset": "synthetic"},
                "timing": {"median_ms": 12.5, "p90_ms": 14.1, "min_ms": 11.8, "samples_ms": [12.5, 11.8, 14.1]},
                "reference_timing": {"median_ms": 20.0, "p90_ms": 21.0, "min_ms": 19.5},
                "throughput": {"samples_per_s": 320.0},
                "accuracy": {
                    "verdict": "pass",
                    "outputs": {
                        "logits": {
                            "name": "logits",
                            "kind": "float",
                            "verdict": "pass",
                            "reasons": [],
                            "metrics": {"max_abs_err": 0.00091, "cosine": 0.99931},
                            "applied": {"cosine_min": 0.99, "max_abs_err_scaled_max": 0.0625},
                        }
                    },
                },
                "environment": {"torch": "2.13.0+cpu"},
                "model": {"parameters": 120707},
            }
        )
    )
    (adapt / "optimization_notes.json").write_text(
        json.dumps(
            {
                "runtime_only": True,
                "chosen": ["bf16_autocast"],
                "passes": [
                    measured_pass("bf16_autocast", True, "faster beyond the noise", 2.5, [2.2, 2.8]),
                    measured_pass("torch_compile", False, "inside the noise", 1.01, [0.95, 1.07]),
                ],
                "combination": [],
                "final": {"passes": ["bf16_autocast"], "outcome": "gain", "speedup": 2.5, "interval": [2.2, 2.8]},
            }
        )
    )
    (adapt / "trace_cpu_bf16_random_synthetic.json").write_text('{"traceEvents": [{"name": "aten::mm", "ph": "X"}]}')
    (adapt / "demo.py").write_text("print('demo')\n")
    (adapt / ".venv").mkdir()
    (adapt / ".venv" / "big.bin").write_bytes(b"\0" * 1024)
    (adapt / "leak.txt").symlink_to(board_path)
    return board_path, logs, adaptations


def complete(store: BoardStore, model_id: str, stage: str, figures: tuple[dict, ...] = ()) -> None:
    """Claim and complete one stage, as the team lead does once its gate passed."""
    task = store.claim_next(owner="test-worker", lease_s=60, stages=[stage])
    assert task is not None and task.model_id == model_id
    store.complete_task(task.id, task.fencing_token, {"ok": True}, figures=figures)


def _start_server(
    root: Path, board_path: Path, logs: Path, adaptations: Path, wait_s: float = HEALTHZ_WAIT_S
) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    env = {**os.environ, "ASCENDBRIDGE_DASHBOARD_TOKEN": TOKEN, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "dashboard",
            "--board",
            str(board_path),
            "--logs",
            str(logs),
            "--adaptations",
            str(adaptations),
            "--port",
            str(port),
            "--heartbeat-fresh",
            "30",
        ],
        cwd=REPO,
        env=env,
        stdout=open(root / "server.log", "wb"),
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"dashboard exited: {(root / 'server.log').read_text()}")
        try:
            if httpx.get(f"{url}/healthz", timeout=1).status_code == 200:
                return proc, url
        except httpx.HTTPError:
            time.sleep(0.1)
    proc.kill()
    raise RuntimeError(f"dashboard did not answer /healthz within {wait_s:.0f} s")


@contextmanager
def served(
    root: Path, board_path: Path, logs: Path, adaptations: Path, wait_s: float = HEALTHZ_WAIT_S
) -> Iterator[str]:
    """The real dashboard on a loopback port for the `with` block (its URL), stopped after it."""
    proc, url = _start_server(root, board_path, logs, adaptations, wait_s)
    try:
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
