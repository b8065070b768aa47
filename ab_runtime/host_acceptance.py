"""Host acceptance, the model side: what this device delivers before a long job trusts it.

    python -m ab_runtime.host_acceptance [--device auto|npu|cuda|cpu] [--budget-s 1.0] [--allreduce]

Measures, on the device the device layer selects (ab_runtime/device.py): dense GEMM throughput per
dtype (float32, bfloat16, float16 where the device's matmul takes it; a square matmul of a fixed
side per device and dtype, GEMM_N, warmed up, then timed repeats: TFLOP/s of the fastest repeat,
with the median and the slowest as its spread), device memory bandwidth (a large tensor copy, read
+ write, GB/s), host-to-device copy (GB/s; on a CPU "n/a": the host is the device) and, with
`--allreduce`, all-reduce bus bandwidth at a few message sizes (ab_runtime/allreduce.py). The
framework judges the figures against its table of expectations (ascendbridge/hostcheck/); this
module only measures, so the same figures come out whoever asks. Why it exists: a throttled card or
a link down makes every later tokens/s look like the model's fault.

Ends with the RESULT line (ab_runtime/result.py): {"ok", "device", "figures", ...}.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import time
from collections.abc import Callable
from typing import Any

import torch

from .allreduce import allreduce_seconds, bus_factor
from .device import DEVICE_CHOICES, DeviceChoice, select_device, synchronize
from .errors import DeviceUnavailable
from .result import EXIT_FAILED, Result, run_main

GEMM_DTYPES = ("float32", "bfloat16", "float16")
# The square matrix side per device and dtype: fixed, so a host's figures compare across runs (a
# matmul's efficiency depends on its size); large enough to be compute-bound, and on a CPU small
# enough for a 2-core host under load (float16 has no fast CPU kernel on most CPUs: ~1-3 GFLOP/s).
GEMM_N: dict[str, dict[str, int]] = {
    "cpu": {"float32": 1024, "bfloat16": 1024, "float16": 512},
    "cuda": dict.fromkeys(GEMM_DTYPES, 8192),
    "npu": dict.fromkeys(GEMM_DTYPES, 8192),
}
COPY_BYTES = {"cpu": 256 * 1024**2, "cuda": 1024**3, "npu": 1024**3}  # far beyond every cache
MIN_REPEATS = 5
MAX_REPEATS = 200


def timed_repeats(fn: Callable[[], Any], sync: Callable[[], None], budget_s: float) -> list[float]:
    """Seconds per call after one warm-up call: at least MIN_REPEATS calls, more while the budget lasts."""
    fn()
    sync()
    samples: list[float] = []
    spent = 0.0
    while len(samples) < MIN_REPEATS or (spent < budget_s and len(samples) < MAX_REPEATS):
        start = time.perf_counter()
        fn()
        sync()
        samples.append(time.perf_counter() - start)
        spent += samples[-1]
    return samples


def _rate(work: float, samples: list[float], scale: float) -> dict[str, float]:
    """`work` per second from timed samples, in units of `scale`. The figure is the fastest repeat: load
    only ever adds time, so the fastest is what the device delivers (the project's rule, ab_runtime/pairstats.py);
    the median and the slowest repeat are its spread, so a loaded host shows as a wide one."""
    return {
        "value": _four(work / min(samples) / scale),
        "median": _four(work / statistics.median(samples) / scale),
        "low": _four(work / max(samples) / scale),
        "repeats": len(samples),
    }


def _four(value: float) -> float:
    """Four significant digits: a CPU's float16 GEMM (0.0012 TFLOP/s) keeps as many as an H100's."""
    return float(f"{value:.4g}")


def gemm(choice: DeviceChoice, name: str, budget_s: float) -> dict[str, Any]:
    """TFLOP/s of a square matmul in dtype `name`, or {"unsupported": why} where this device's matmul
    refuses the dtype."""
    dtype = getattr(torch, name)
    side = GEMM_N[choice.kind][name]
    try:
        a = torch.randn(side, side, device=choice.torch_device).to(dtype)
        b = torch.randn(side, side, device=choice.torch_device).to(dtype)
        samples = timed_repeats(lambda: torch.mm(a, b), lambda: synchronize(choice), budget_s)
    except (RuntimeError, TypeError) as exc:  # "not implemented for 'Half'": the device has no such matmul
        return {"unsupported": str(exc).splitlines()[0] if str(exc) else type(exc).__name__}
    return {**_rate(2.0 * side**3, samples, 1e12), "unit": "TFLOP/s", "n": side}


def copy_bandwidth(choice: DeviceChoice, budget_s: float) -> dict[str, Any]:
    """GB/s of a large device-to-device copy, counting the bytes read and the bytes written."""
    elements = COPY_BYTES[choice.kind] // 4
    src = torch.ones(elements, device=choice.torch_device)
    dst = torch.empty_like(src)
    samples = timed_repeats(lambda: dst.copy_(src), lambda: synchronize(choice), budget_s)
    return {**_rate(2.0 * elements * 4, samples, 1e9), "unit": "GB/s", "bytes": elements * 4}


def host_to_device(choice: DeviceChoice, budget_s: float) -> dict[str, Any]:
    """GB/s of a pinned host buffer copied to the device; n/a on a CPU, where the host is the device."""
    if choice.kind == "cpu":
        return {"na": "n/a, host is the device"}
    elements = COPY_BYTES[choice.kind] // 4 // 4
    src = torch.ones(elements).pin_memory()
    dst = torch.empty(elements, device=choice.torch_device)
    samples = timed_repeats(lambda: dst.copy_(src, non_blocking=True), lambda: synchronize(choice), budget_s)
    return {**_rate(elements * 4.0, samples, 1e9), "unit": "GB/s", "bytes": elements * 4}


def bus_bandwidth(kind: str) -> dict[str, Any]:
    """All-reduce bus bandwidth (GB/s) per message size (ab_runtime/allreduce.py); n/a with one device."""
    timed = allreduce_seconds(kind)
    if "na" in timed:
        return timed
    factor = bus_factor(timed["processes"])
    sizes = [{"bytes": row["bytes"], **_rate(row["bytes"] * factor, row["seconds"], 1e9)} for row in timed["sizes"]]
    return {"unit": "GB/s", "backend": timed["backend"], "processes": timed["processes"], "sizes": sizes}


def measure(requested: str = "auto", budget_s: float = 1.0, allreduce: bool = False) -> Result:
    """Every figure of this host's acceptance on the device the device layer selects (no fallback)."""
    choice = select_device(requested)
    torch.manual_seed(0)
    started = time.perf_counter()
    figures: dict[str, Any] = {f"gemm_{name}": gemm(choice, name, budget_s) for name in GEMM_DTYPES}
    figures["copy_bandwidth"] = copy_bandwidth(choice, budget_s)
    figures["host_to_device"] = host_to_device(choice, budget_s)
    if allreduce:
        figures["allreduce"] = bus_bandwidth(choice.kind)
    return {
        "ok": True,
        "device": {"kind": choice.kind, "name": choice.name, "torch_device": choice.torch_device},
        "threads": torch.get_num_threads(),
        # what else ran: on a shared host the figures follow the load (docs/training.md, "Host acceptance")
        "load_average": [round(x, 2) for x in os.getloadavg()],
        "cpus": os.cpu_count(),
        "torch": torch.__version__,
        "torch_npu": choice.torch_npu_version,
        "machine": platform.machine(),
        "budget_s": budget_s,
        "seconds": round(time.perf_counter() - started, 2),
        "figures": figures,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="auto", choices=DEVICE_CHOICES)
    parser.add_argument("--budget-s", type=float, default=1.0, help="timed seconds per figure")
    parser.add_argument("--allreduce", action="store_true", help="all-reduce bus bandwidth over this host's devices")
    args = parser.parse_args(argv)
    return run_main(
        lambda: measure(args.device, args.budget_s, args.allreduce),
        failures=(DeviceUnavailable,),
        on_failure=lambda exc, result: result.update(ok=False),
        exit_code=lambda result: 0 if result.get("ok") else EXIT_FAILED,
    )


if __name__ == "__main__":
    raise SystemExit(main())
