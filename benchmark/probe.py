"""The environment probe (framework side): run it in an adaptation's env, store it on the board.

The probe itself (ascendbridge/gatekit/inner/probe.py) needs torch, so it runs with an adaptation's
interpreter; its JSON is stored as a board event of kind `env_probe`, which the roofline tool
and the dashboard read back with BoardStore.latest_event.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ascendbridge.board.reader import BoardReader
from ascendbridge.board.records import NewEvent
from ascendbridge.board.store import BoardStore
from ascendbridge.gatekit.checker import json_report
from ascendbridge.gatekit.envs import run_inner

EVENT_KIND = "env_probe"
PROBE_TIMEOUT_S = 300.0


class ProbeError(RuntimeError):
    """The probe did not produce a result."""


def run_probe(python: Path, device: str = "auto", budget_s: float = 0.4) -> dict[str, Any]:
    result = run_inner(python, "probe.py", ["--device", device, "--budget-s", str(budget_s)], timeout_s=PROBE_TIMEOUT_S)
    data = json_report(result.output) if result.ok else None
    if data is None:
        errors = [ln for ln in result.output.splitlines() if ln.startswith("error: ")]
        raise ProbeError(
            errors[-1][len("error: ") :] if errors else f"probe failed (exit {result.exit_code}): {result.tail(2)}"
        )
    return data


def summary_line(probe: dict[str, Any]) -> str:
    peaks = probe["peaks"]
    gemm = ", ".join(f"{k} {v} GFLOP/s" for k, v in sorted(peaks["gemm_gflops"].items()) if v is not None)
    return (
        f"{probe['measured_on']} ({probe['device_name']}): {gemm}; copy {peaks['bandwidth_gbs']} GB/s; "
        f"torch {probe['versions']['torch']}, torch_npu {probe['versions']['torch_npu'] or '-'}, "
        f"CANN {(probe.get('cann') or {}).get('version', '-')}"
    )


def store_probe(store: BoardStore, probe: dict[str, Any], origin: str = "env_probe") -> None:
    store.add_event(NewEvent(EVENT_KIND, summary_line(probe), data=probe, origin=origin))


def latest_probe(store: BoardReader, device_kind: str | None = None) -> dict[str, Any] | None:
    """The last stored probe, if it was measured on `device_kind` (any kind when None)."""
    event = store.latest_event(EVENT_KIND)
    if event is None or (device_kind and event.data.get("measured_on") != device_kind):
        return None
    return event.data
