#!/usr/bin/env python3
"""Serving suite: what the engine buys a team. Per model, in one run: the package's own `generate`
(the benchmark's generation workload, eager, at batch 1 and at --batch) next to the same model
served by vLLM (the serving stage's export, plan and launch) and driven by `vllm bench serve` with
--batch requests in flight at once (`--max-concurrency`, request rate inf), the same prompt and
output lengths; TTFT, TPOT (median ± stdev) and output tokens/s end to end: the package's
batch x new tokens over TTFT + (new tokens - 1) x TPOT, the server's output tokens over its run's
wall time (requests queued behind the in-flight ones included).

The package's figures: median ± stdev over --iters timed generations of a batch. The server's:
median ± stdev over its requests (--batch x --rounds of them), throughput over the whole run.

  uv run python bench/serving_suite.py [--models tiny-llama32] [--batch 4] [--rounds 4]
      [--prompt-len 16] [--new-tokens 8] [--iters 3] [--out bench_serving.json]

Needs the serve environment (`uv run python -m serving.env`) and the shared CPU torch test
environment. CPU figures on a shared machine are load-dominated: the run prints the load average.
"""

from __future__ import annotations

import argparse
import functools
import io
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from ascendbridge.package.spec import WorkloadSpec  # noqa: E402
from bench.support.torch_env import torch_env_python  # noqa: E402
from bench.workload_suite import each_model, finish, measure  # noqa: E402
from serving.bench import bench_args, run_bench  # noqa: E402
from serving.env import serve_python  # noqa: E402
from serving.plan import Refusal  # noqa: E402
from serving.server import free_port, served  # noqa: E402
from serving.settings import ServingSettings  # noqa: E402
from serving.steps import export, plan_inputs, plans, server_argv  # noqa: E402

DEMO = REPO / "demo_models"
print = functools.partial(print, flush=True)  # progress shows while a long run goes on

PACKAGE_THREADS_HELP = (
    "OMP_NUM_THREADS of the package's generate (0: torch's default; on a loaded host a "
    "thread the scheduler parks stalls every parallel op)"
)


def spread(values: list[float]) -> dict[str, float]:
    """Median and stdev in ms of values in seconds."""
    return {
        "median_ms": 1000 * statistics.median(values) if values else 0.0,
        "stdev_ms": 1000 * statistics.stdev(values) if len(values) > 1 else 0.0,
    }


def served_figures(run: dict[str, Any]) -> dict[str, Any]:
    """TTFT and TPOT over the successful requests of one `vllm bench serve` result, and its output
    tokens over its wall time. A client-side TPOT near 0 means a request's tokens were delivered
    together (the API server busy), not that the engine decoded faster."""
    ok = [i for i, error in enumerate(run["errors"]) if not error]
    ttfts = [run["ttfts"][i] for i in ok]
    tpots = [
        (run["latencies"][i] - run["ttfts"][i]) / (run["output_lens"][i] - 1) for i in ok if run["output_lens"][i] > 1
    ]
    return {
        "requests": len(ok),
        "ttft_ms": spread(ttfts),
        "tpot_ms": spread(tpots),
        "output_tokens_per_s": sum(run["output_lens"][i] for i in ok) / run["duration"],
    }


def package_figures(run: dict[str, Any], new_tokens: int) -> dict[str, Any]:
    """The package's TTFT and TPOT at one batch, and its output tokens/s end to end."""
    total_ms = run["ttft_ms"]["median_ms"] + (new_tokens - 1) * run["tpot_ms"]["median_ms"]
    return {
        "ttft_ms": run["ttft_ms"],
        "tpot_ms": run["tpot_ms"],
        "output_tokens_per_s": 1000 * run["batch"] * new_tokens / total_ms if total_ms else 0.0,
    }


def package_runs(directory: Path, args: argparse.Namespace) -> list[dict[str, Any]]:
    """The package's generation workload, eager, at batch 1 and --batch (the benchmark's code)."""
    saved = os.environ.get("OMP_NUM_THREADS")
    if args.package_threads:
        os.environ["OMP_NUM_THREADS"] = str(args.package_threads)
    try:
        return list(measure(directory, [], args.warmup, args.iters, 900)["eager"]["runs"])
    finally:
        if saved is None:
            os.environ.pop("OMP_NUM_THREADS", None)
        else:
            os.environ["OMP_NUM_THREADS"] = saved


def serve_and_bench(directory: Path, name: str, family: str, args: argparse.Namespace) -> dict[str, Any]:
    """The serving stage's export, plan and launch, then `vllm bench serve` at --batch in flight."""
    python = serve_python(os.environ.get("ASCENDBRIDGE_SERVING_PYTHON", ""))
    settings = ServingSettings(new_tokens=args.new_tokens)
    log = io.StringIO()
    export(python, directory, settings, False, log)
    architecture = json.loads((directory / "serve" / "reference.json").read_text())["config"]["architectures"][0]
    local, _ = plans(directory, family, plan_inputs(settings, [architecture], architecture))
    if isinstance(local, Refusal):
        raise RuntimeError(local.reason)
    port = free_port()
    argv, server_log = server_argv(python, local, directory.name, port), directory / "serve" / "server.log"
    with served(argv, directory, local.env, port, settings.start_timeout_s, server_log) as server:
        bench = bench_args(
            server.url,
            directory.name,
            str((directory / "serve" / "weights").resolve()),
            local.endpoint,
            args.batch * args.rounds,
            args.prompt_len,
            args.new_tokens,
        )
        runs = run_bench(python, ["inf"], [*bench, "--max-concurrency", str(args.batch)], 900, log)
        cold = server.cold_start_s
    return {"cold_start_s": cold, **served_figures(runs["inf"])}


def describe(figures: dict[str, Any]) -> str:
    return (
        f"TTFT {figures['ttft_ms']['median_ms']:.2f}±{figures['ttft_ms']['stdev_ms']:.2f} ms, "
        f"TPOT {figures['tpot_ms']['median_ms']:.2f}±{figures['tpot_ms']['stdev_ms']:.2f} ms, "
        f"{figures['output_tokens_per_s']:.0f} output tok/s"
    )


def main() -> int:
    manifest = json.loads((DEMO / "manifest.json").read_text())["models"]
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", default="tiny-llama32", help="demo causal LMs the CPU engine serves")
    p.add_argument("--batch", type=int, default=4, help="generations at once (package) / requests in flight (server)")
    p.add_argument("--rounds", type=int, default=4, help="the server's requests: batch x rounds")
    p.add_argument("--prompt-len", type=int, default=16)
    p.add_argument("--new-tokens", type=int, default=8)
    p.add_argument("--warmup", type=int, default=1)
    p.add_argument("--iters", type=int, default=3)
    p.add_argument("--package-threads", type=int, default=0, help=PACKAGE_THREADS_HELP)
    p.add_argument("--out", default="bench_serving.json")
    args = p.parse_args()
    names = [n for n in args.models.split(",") if n]
    unknown = [n for n in names if manifest.get(n, {}).get("task_family") != "causal_lm"]
    if unknown:
        print(f"error: not a demo causal LM: {', '.join(unknown)}", file=sys.stderr)
        return 2
    workload = WorkloadSpec(
        prompt_len=args.prompt_len, new_tokens=args.new_tokens, batch=args.batch, sweep=[1], headline_batch=args.batch
    )
    python = torch_env_python()
    start = time.perf_counter()
    print(
        f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs; batch {args.batch}, prompt "
        f"{args.prompt_len} tokens, {args.new_tokens} new tokens"
    )

    def fill(directory: Path, entry: dict[str, Any]) -> None:
        name = entry["model"]
        runs = package_runs(directory, args)
        entry["package"] = {f"batch_{r['batch']}": package_figures(r, args.new_tokens) for r in runs}
        entry["served"] = serve_and_bench(directory, name, manifest[name]["task_family"], args)

    def show(entry: dict[str, Any]) -> None:
        for label, figures in entry["package"].items():
            print(f"  package generate, {label}: {describe(figures)}")
        print(
            f"  vLLM, {args.batch} in flight ({entry['served']['requests']} requests, ready in "
            f"{entry['served']['cold_start_s']:.0f} s): {describe(entry['served'])}"
        )

    results = each_model(
        names, manifest, python, workload, fill, (RuntimeError, OSError), show, lambda entry: entry["model"]
    )
    return finish(args.out, results, start, args=vars(args))


if __name__ == "__main__":
    raise SystemExit(main())
