#!/usr/bin/env python3
"""What two packages with the same lock cost with and without stable environments.

    uv run python bench/stable_env_bench.py [--models tiny-bert,tiny-vit] [--search] [--out bench_stable_env.json]

Two tiny adaptations (bench/support/tiny_adaptations.py: real generator output, `uv lock`ed) are
synced and then compile the same small graph (torch.compile, inductor, CPU) in their own
environment, first as before (`ASCENDBRIDGE_STABLE_ENVS=none`: each package syncs its own `.venv`),
then as the team lead runs them now (one stable environment for the lock), each mode with a fresh
environment root and a fresh kernel cache. Printed per package: the sync's seconds, the compile's
seconds and how many C++ kernel builds (`*.so` in the inductor cache) it added. `--search`: instead
of the small graph, the optimization search's compile pass on the package's model
(`python -m ab_runtime.optimize --device cpu --passes cpu_compile`); a model named twice is two
packages of it at different paths, as two attempts' staging copies are.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import tempfile
import time
from pathlib import Path
from typing import Any

# One graph both packages compile: a small MLP whose inductor C++ kernels take seconds to build.
PROBE = """
import json, time, torch
model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.GELU(), torch.nn.LayerNorm(128), torch.nn.Linear(128, 8))
x = torch.randn(4, 64)
started = time.perf_counter()
with torch.no_grad():
    torch.compile(model)(x)
print("COMPILE " + json.dumps({"compile_s": time.perf_counter() - started, "python": __import__("sys").executable}))
"""


def _builds(cache: Path) -> int:
    return sum(1 for _ in cache.rglob("*.so")) if cache.is_dir() else 0


SEARCH = ["-m", "ab_runtime.optimize", "--device", "cpu", "--passes", "cpu_compile"]


def one_mode(mode: str, models: list[str], tmp: Path, search: bool) -> list[dict[str, Any]]:
    """Sync each package and compile the probe (or run the search) in it; `mode` `none` or `stable`."""
    from ascendbridge.package import uv_env
    from ascendbridge.stable_envs import python as package_python
    from bench.support.tiny_adaptations import make_adaptation

    os.environ["ASCENDBRIDGE_STABLE_ENVS"] = "none" if mode == "none" else str(tmp / "envs")
    os.environ["ASCENDBRIDGE_KERNEL_CACHE"] = str(tmp / "kernels")
    os.environ.pop("TORCHINDUCTOR_CACHE_DIR", None)
    cache = tmp / "kernels" / "inductor"
    rows = []
    for i, name in enumerate(models):
        directory = make_adaptation(tmp / f"p{i}", name)
        assert uv_env.lock(directory).ok, f"uv lock of {name} failed"
        (directory / "compile_probe.py").write_text(PROBE)
        started = time.perf_counter()
        sync = uv_env.sync(directory, "cpu")
        sync_s = time.perf_counter() - started
        assert sync.ok, sync.tail(5)
        before = _builds(cache)
        started = time.perf_counter()
        argv = SEARCH if search else ["compile_probe.py"]
        run = uv_env.run_in_env(directory, argv, env={"OMP_NUM_THREADS": "1"})
        line = next((ln for ln in run.output.splitlines() if ln.startswith("COMPILE ")), None)
        assert run.ok and (search or line), run.tail(10)
        figures: dict[str, Any] = {"run_s": time.perf_counter() - started, "compile_s": None}
        figures["python"] = str(package_python(directory))
        figures.update(json.loads(line.removeprefix("COMPILE ")) if line else {})
        rows.append(
            {
                "mode": mode,
                "model": name,
                "sync_s": round(sync_s, 2),
                "run_s": round(figures["run_s"], 2),
                "compile_s": figures["compile_s"] and round(figures["compile_s"], 2),
                "kernel_builds": _builds(cache) - before,
                "python": figures["python"],
            }
        )
        print(json.dumps(rows[-1]), flush=True)
    return rows


def cpu_name() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="tiny-bert,tiny-vit")
    parser.add_argument("--search", action="store_true", help="run the search's compile pass instead")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    models = args.models.split(",")
    rows = []
    for mode in ("none", "stable"):
        with tempfile.TemporaryDirectory() as tmp:
            rows += one_mode(mode, models, Path(tmp), args.search)
    report = {
        "cpu": cpu_name(),
        "avx512": "avx512f" in Path("/proc/cpuinfo").read_text(),
        "cores": os.cpu_count(),
        "load_avg": os.getloadavg(),
        "probe": "search cpu_compile" if args.search else "small graph",
        "rows": rows,
    }
    if args.out:
        args.out.write_text(json.dumps(report, indent=1) + "\n")
    print(json.dumps({k: v for k, v in report.items() if k != "rows"}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
