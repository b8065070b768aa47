"""Environment probe, run in an adaptation's interpreter: versions, devices, measured peaks.

    python probe.py [--device auto|npu|cuda|cpu] [--budget-s 0.4]

Prints one JSON object: torch / torch_npu / transformers / CANN versions, device count and
names, and small microbenchmarks on the chosen device: dense GEMM throughput per dtype (GFLOP/s)
and memory bandwidth of a large tensor copy (GB/s, read + write). The roofline tool compares a
model's achieved throughput against these measured peaks, not against datasheet numbers.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import platform
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

CANN_VERSION_FILES = ("version.cfg", "ascend_toolkit_install.info", "version.info")


def cann_version() -> dict[str, str] | None:
    """CANN's version from ASCEND_TOOLKIT_HOME (or the default install path) when present."""
    roots = [
        os.environ.get("ASCEND_TOOLKIT_HOME"),
        os.environ.get("ASCEND_HOME_PATH"),
        "/usr/local/Ascend/ascend-toolkit/latest",
    ]
    for root in filter(None, roots):
        base = Path(root)
        for candidate in [base / n for n in CANN_VERSION_FILES] + sorted(base.glob(f"*/{CANN_VERSION_FILES[1]}")):
            if candidate.is_file():
                for line in candidate.read_text(errors="replace").splitlines():
                    key, _, value = line.partition("=")
                    if key.strip().lower() in ("version", "toolkit_version", "runtime_running_version"):
                        return {"version": value.strip().strip("[]\"'"), "source": str(candidate)}
    return None


def _version(module: str) -> str | None:
    try:
        mod = __import__(module)
    except Exception:
        return None
    return str(getattr(mod, "__version__", "unknown"))


def devices(torch: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"cpu": {"count": os.cpu_count(), "name": _cpu_name(), "threads": torch.get_num_threads()}}
    if torch.cuda.is_available():
        out["cuda"] = {
            "count": torch.cuda.device_count(),
            "names": [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())],
        }
    try:
        import torch_npu  # noqa: F401

        if torch.npu.is_available():
            n = torch.npu.device_count()
            out["npu"] = {"count": n, "names": [torch.npu.get_device_name(i) for i in range(n)]}
    except Exception:
        pass
    return out


def _cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _timed(fn: Callable[[], Any], sync: Callable[[], None], budget_s: float) -> float:
    """Best seconds per call over a small time budget (after one warmup call)."""
    fn()
    sync()
    best, spent, calls = float("inf"), 0.0, 0
    while calls < 3 or spent < budget_s:
        start = time.perf_counter()
        fn()
        sync()
        elapsed = time.perf_counter() - start
        best, spent, calls = min(best, elapsed), spent + elapsed, calls + 1
        if calls >= 50:
            break
    return best


def _gemm_size(torch: Any, device: str, dtype: Any, sync: Callable[[], None], n: int, budget_s: float) -> int:
    """`n`, or smaller where this dtype is slow here (fp16 on many CPUs): a call takes <= budget/5."""
    small = 256
    a = torch.randn(small, small, device=device).to(dtype)
    seconds = _timed(lambda: torch.mm(a, a), sync, budget_s / 8)
    rate = 2.0 * small**3 / seconds
    fitting = int((rate * budget_s / 5 / 2.0) ** (1 / 3))
    return max(small, min(n, fitting // 64 * 64))


def microbenchmarks(torch: Any, kind: str, budget_s: float) -> dict[str, Any]:
    # A timed job's own card: ASCENDBRIDGE_NPU_INDEX where the team lead ran it unmasked (a profiled stage).
    npu = os.environ.get("ASCENDBRIDGE_NPU_INDEX", "0").split(",")[0].strip() or "0"
    device = {"npu": f"npu:{npu}", "cuda": "cuda:0"}.get(kind, "cpu")
    backend = getattr(torch, kind, None) if kind != "cpu" else None
    sync = backend.synchronize if backend is not None else (lambda: None)
    n = 1024 if kind == "cpu" else 4096
    gemm: dict[str, float | None] = {}
    sizes: dict[str, int] = {}
    for name in ("float32", "bfloat16", "float16"):
        try:
            size = _gemm_size(torch, device, getattr(torch, name), sync, n, budget_s)
            a = torch.randn(size, size, device=device).to(getattr(torch, name))
            b = torch.randn(size, size, device=device).to(getattr(torch, name))
            seconds = _timed(functools.partial(torch.mm, a, b), sync, budget_s)
            gemm[name], sizes[name] = round(2.0 * size**3 / seconds / 1e9, 2), size
        except (RuntimeError, TypeError):  # dtype not supported by this device's matmul
            gemm[name] = None
    elements = 32 * 1024**2  # 128 MiB of float32 per buffer: far beyond the caches
    src = torch.ones(elements, device=device)
    dst = torch.empty_like(src)
    seconds = _timed(lambda: dst.copy_(src), sync, budget_s)
    bandwidth = 2 * elements * 4 / seconds / 1e9
    return {
        "device": device,
        "gemm_n": sizes,
        "gemm_gflops": gemm,
        "copy_bytes": 2 * elements * 4,
        "bandwidth_gbs": round(bandwidth, 2),
    }


def pick_kind(torch: Any, requested: str) -> str:
    found = devices(torch)
    if requested == "auto":
        return "npu" if "npu" in found else "cuda" if "cuda" in found else "cpu"
    if requested != "cpu" and requested not in found:
        raise SystemExit(f"error: device '{requested}' is not available here")
    return requested


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", default="auto", choices=("auto", "npu", "cuda", "cpu"))
    parser.add_argument("--budget-s", type=float, default=0.4, help="time per microbenchmark")
    args = parser.parse_args(argv)
    import torch

    kind = pick_kind(torch, args.device)
    result = {
        "versions": {
            "torch": torch.__version__,
            "torch_npu": _version("torch_npu"),
            "transformers": _version("transformers"),
            "python": platform.python_version(),
        },
        "cann": cann_version(),
        "devices": devices(torch),
        "measured_on": kind,
        "device_name": (devices(torch).get(kind, {}).get("names") or [_cpu_name()])[0],
        "peaks": microbenchmarks(torch, kind, args.budget_s),
        "host": platform.node(),
        "platform": platform.platform(),
    }
    print(json.dumps(result, sort_keys=True))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
