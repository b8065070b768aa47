"""Workload profiles per task family: the figures users decide on, beyond one forward pass.

- `generation` (causal_lm): greedy decoding with the KV cache. TTFT = the prefill of a P-token
  prompt (to the first token), TPOT = the mean decode step over the N-1 following tokens, tokens/s =
  batch / TPOT, at batch 1 and a larger batch; the batch-1 greedy tokens compared token by token
  with the CPU float32 reference (match rate, index of the first divergence).
- `encoder_generation` (seq2seq, speech_seq2seq, vision_seq2seq): encoder latency, then the same
  figures on the decoder (TTFT = encoder + first decoder step).
- `batch_sweep` (encoder families): latency at batch 1 and throughput over a batch sweep, stopped
  at the first batch that runs out of memory, with the knee of the curve.
- `forward`: only the single forward pass (the accuracy workload, always measured).

Every figure is timed the harness's way (the same warmup for every variant, the RNG re-seeded
after warmup, the device synchronised around every timed call, the profiler off, each timed call
or generation followed by one call of the fixed calibration probe, ab_runtime/calibration.py) and
recorded with its raw samples and the probe's (a `calibration` block per sweep point and per
generation batch), so the benchmark gate recomputes it (ascendbridge/gatekit/metrics_check.py). Decode is
memory-bound: the bytes read per decode step (weights + the mean KV cache) over TPOT give the
achieved bandwidth, which the framework sets against the environment probe's measured bandwidth.

Hook for decode passes (static KV cache + compile, CUDA graphs, torchair, fused attention):
a pass sets `Build.decoder` to a factory `(build, model, encoder_decoder, new_tokens) -> Decoder`;
`decoder_for` picks it, else the eager `HFDecoder` below. The static-cache passes decode through
`StaticCacheDecoder`: the same greedy loop with a transformers StaticCache sized for the prompt
plus the new tokens, so the compiled forward sees fixed cache shapes.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import torch

from . import build as ab_build
from . import calibration, sizing
from .inputs import Signature
from .measure import clocked, profiler_active
from .phases import phase
from .progress import Progress
from .workload_figures import (  # noqa: F401  (WORKLOADS, Workload, resolve: this module's public names too)
    ENCODER_DECODER_FAMILIES,
    GENERATION_PAIRED_WITH,
    KNEE_FRACTION,
    WORKLOADS,
    Workload,
    decode_bandwidth_gbs,
    divergence,
    fastest_steps,
    generation_figures,
    knee,
    resolve,
    stats,
)

# --- decoding --------------------------------------------------------------------------------


def cache_bytes(cache: Any) -> int:
    """Bytes of every tensor held by a KV cache (DynamicCache / EncoderDecoderCache of any
    transformers release, or legacy tuples), each tensor counted once."""
    seen: set[int] = set()

    def walk(obj: Any, depth: int) -> int:
        if isinstance(obj, torch.Tensor):
            if id(obj) in seen:
                return 0
            seen.add(id(obj))
            return obj.numel() * obj.element_size()
        if depth > 4 or obj is None or isinstance(obj, (str, bytes, int, float, bool, torch.device)):
            return 0
        if isinstance(obj, dict):
            return sum(walk(v, depth + 1) for v in obj.values())
        if isinstance(obj, (list, tuple)):
            return sum(walk(v, depth + 1) for v in obj)
        return sum(walk(v, depth + 1) for v in vars(obj).values()) if hasattr(obj, "__dict__") else 0

    return walk(cache, 0)


class Decoder(Protocol):
    """Greedy decoding, one call per phase, so each phase can be timed between device syncs."""

    def encode(self, inputs: dict[str, Any]) -> None: ...
    def prefill(self, inputs: dict[str, Any]) -> torch.Tensor: ...  # the first generated tokens [B]
    def step(self, tokens: torch.Tensor) -> torch.Tensor: ...  # the next tokens [B]
    def cache_bytes(self) -> int: ...


@dataclass
class HFDecoder:
    """Eager greedy decoding through the model's own KV cache (the transformers forward), under
    the Build's contexts and autocast; the parameter is `cache` (transformers 5) or
    `past_key_values` (4.x), whichever the forward takes."""

    build: ab_build.Build
    model: torch.nn.Module
    encoder_decoder: bool
    run: Callable[[dict[str, Any]], Any] = field(init=False)
    cache_name: str = field(init=False)
    state: dict[str, Any] = field(default_factory=dict)
    # A decode pass's compiled model.forward, called instead of the Build's model (None: the model).
    forward: Callable[..., Any] | None = None

    def __post_init__(self) -> None:
        accepted = Signature.of(self.model).accepted
        self.cache_name = "cache" if "cache" in accepted else "past_key_values"
        flags = {k: v for k, v in (("return_dict", True), ("use_cache", True)) if k in accepted}
        if self.forward is None:
            self.run = ab_build.finalize(self.build, flags)
        else:
            forward = self.forward

            def run(inputs: dict[str, Any]) -> Any:
                with ab_build.build_contexts(self.build):
                    return forward(**inputs, **flags)

            self.run = run

    def encode(self, inputs: dict[str, Any]) -> None:
        """Encoder-decoders: run the encoder once and keep its output for every decoder step."""
        encoder = self.model.get_encoder()
        main = getattr(encoder, "main_input_name", None) or getattr(self.model, "main_input_name", "input_ids")
        enc_inputs = {k: v for k, v in inputs.items() if not k.startswith("decoder_")}
        accepted = Signature.of(encoder).accepted
        enc_inputs = {k: v for k, v in enc_inputs.items() if k in accepted or k == main}
        with ab_build.build_contexts(self.build):
            self.state = {
                "encoder_outputs": encoder(**enc_inputs, return_dict=True),
                "attention_mask": inputs.get("attention_mask"),
            }

    def _next(self, out: Any) -> torch.Tensor:
        self.state["cache"] = getattr(out, "cache", None) or getattr(out, "past_key_values", None)
        return out.logits[:, -1].argmax(-1)

    def fresh_cache(self, inputs: dict[str, Any], prompt_len: int) -> dict[str, Any]:
        """Extra keywords of the prefill call: none here, the model creates its dynamic cache."""
        return {}

    def step_extra(self) -> dict[str, Any]:
        """Extra keywords of a decode step call (a static cache's position)."""
        return {}

    def prefill(self, inputs: dict[str, Any]) -> torch.Tensor:
        if self.encoder_decoder:
            start = decoder_start(self.model)
            batch = next(v for v in inputs.values() if isinstance(v, torch.Tensor)).shape[0]
            first = torch.full((batch, 1), start, dtype=torch.long, device=self.build_device(inputs))
            call = {"encoder_outputs": self.state["encoder_outputs"], "decoder_input_ids": first}
            if self.state.get("attention_mask") is not None:
                call["attention_mask"] = self.state["attention_mask"]
            call.update(self.fresh_cache(inputs, 1))
            return self._next(self.run(call))
        self.state = {"attention_mask": inputs.get("attention_mask")}
        call = {k: inputs[k] for k in ("input_ids", "attention_mask") if inputs.get(k) is not None}
        call.update(self.fresh_cache(inputs, int(inputs["input_ids"].shape[1])))
        return self._next(self.run(call))

    def step(self, tokens: torch.Tensor) -> torch.Tensor:
        call: dict[str, Any] = {self.cache_name: self.state["cache"], **self.step_extra()}
        if self.encoder_decoder:
            call.update(encoder_outputs=self.state["encoder_outputs"], decoder_input_ids=tokens[:, None])
            if self.state.get("attention_mask") is not None:
                call["attention_mask"] = self.state["attention_mask"]
        else:
            call["input_ids"] = tokens[:, None]
            mask = self.state.get("attention_mask")
            if mask is not None:
                mask = torch.cat([mask, mask.new_ones(mask.shape[0], 1)], dim=1)
                self.state["attention_mask"] = call["attention_mask"] = mask
        return self._next(self.run(call))

    def cache_bytes(self) -> int:
        return cache_bytes(self.state.get("cache"))

    @staticmethod
    def build_device(inputs: dict[str, Any]) -> torch.device:
        return next(v for v in inputs.values() if isinstance(v, torch.Tensor)).device


def static_cache(
    model: torch.nn.Module, batch: int, length: int, device: Any, dtype: torch.dtype, encoder_len: int | None = None
) -> Any:
    """A transformers StaticCache as generate builds one (`cache_implementation="static"`):
    `StaticCache(config=, max_cache_len=)` in transformers 5 (tensors sized at the first update),
    with max_batch_size / device / dtype where the installed release asks for them (4.x); an
    EncoderDecoderCache of a self-attention and a cross-attention one for encoder-decoders."""
    from transformers import StaticCache

    accepted = inspect.signature(StaticCache.__init__).parameters
    text = getattr(model.config, "get_text_config", None)
    config = text(decoder=True) if callable(text) else model.config
    sizes = {"max_batch_size": batch, "batch_size": batch, "device": device, "dtype": dtype}

    def one(max_len: int) -> Any:
        return StaticCache(config=config, max_cache_len=max_len, **{k: v for k, v in sizes.items() if k in accepted})

    cache = one(length)
    if encoder_len is None:
        return cache
    from transformers import EncoderDecoderCache

    return EncoderDecoderCache(cache, one(encoder_len))


@dataclass
class StaticCacheDecoder(HFDecoder):
    """HFDecoder's greedy loop with a static KV cache of prompt + `new_tokens` positions (the
    decode passes that compile the forward: fixed cache shapes, one graph per phase). Where the
    forward takes `cache_position` (transformers 4.x) the positions are passed explicitly."""

    new_tokens: int = 0
    position: int = field(default=0, init=False)

    def fresh_cache(self, inputs: dict[str, Any], prompt_len: int) -> dict[str, Any]:
        tensor = next(v for v in inputs.values() if isinstance(v, torch.Tensor))
        dtype = next(self.model.parameters()).dtype
        encoder_len = None
        if self.encoder_decoder:
            encoder_len = int(self.state["encoder_outputs"][0].shape[1])
        cache = static_cache(
            self.model, int(tensor.shape[0]), prompt_len + self.new_tokens, tensor.device, dtype, encoder_len
        )
        self.position = prompt_len
        call = {self.cache_name: cache}
        if "cache_position" in Signature.of(self.model).accepted:
            call["cache_position"] = torch.arange(prompt_len, device=tensor.device)
        return call

    def step_extra(self) -> dict[str, Any]:
        if "cache_position" not in Signature.of(self.model).accepted:
            return {}
        position = torch.tensor([self.position], device=next(self.model.parameters()).device)
        self.position += 1
        return {"cache_position": position}


def decoder_start(model: torch.nn.Module) -> int:
    config = model.config
    for key in ("decoder_start_token_id", "bos_token_id", "pad_token_id"):
        value = getattr(config, key, None) or getattr(getattr(config, "decoder", None), key, None)
        if isinstance(value, int):
            return value
    return 0


def decoder_for(build: ab_build.Build, model: torch.nn.Module, encoder_decoder: bool, new_tokens: int) -> Decoder:
    """The decoder of a Build: a decode pass's own (`Build.decoder`, set by the kind-`decode`
    passes of ab_runtime.optimize.passes) or eager."""
    factory = build.decoder
    if factory is not None:
        return factory(build, model, encoder_decoder, new_tokens)
    return HFDecoder(build, model, encoder_decoder)


@dataclass
class GenerationRun:
    tokens: list[list[int]]  # [batch][new_tokens]
    encoder_ms: float | None
    ttft_ms: float
    steps_ms: list[float]
    cache_after_prefill: int
    cache_final: int


def generate(
    decoder: Decoder, inputs: dict[str, Any], new_tokens: int, sync: Callable[[], None], encoder_decoder: bool
) -> GenerationRun:
    """One greedy generation, each phase bracketed by device synchronisation."""
    encoder_ms = None
    if encoder_decoder:
        _, encoder_ms = clocked(lambda: decoder.encode(inputs), sync)
    token, prefill_ms = clocked(lambda: decoder.prefill(inputs), sync)
    ttft = prefill_ms + (encoder_ms or 0.0)
    after_prefill = decoder.cache_bytes()
    produced, steps = [token], []
    for _ in range(new_tokens - 1):
        token, ms = clocked(lambda: decoder.step(produced[-1]), sync)
        produced.append(token)
        steps.append(ms)
    tokens = torch.stack(produced, dim=1).to("cpu").tolist()
    return GenerationRun(tokens, encoder_ms, ttft, steps, after_prefill, decoder.cache_bytes())


def weight_bytes(model: torch.nn.Module) -> int:
    return sum(p.numel() * p.element_size() for p in model.parameters())


def measure_generation(
    session: Any, build: ab_build.Build, workload: Workload, warmup: int, iters: int, reference_tokens: list[int] | None
) -> dict[str, Any]:
    """TTFT / TPOT / tokens/s at batch 1 and `workload.batch`, peak memory and decode bandwidth
    per batch, and the batch-1 greedy tokens against the reference's."""
    from . import device as ab_device

    if profiler_active():
        raise RuntimeError("a profiler is active: timing with the profiler on is not allowed")
    enc_dec = session.spec.task_family in ENCODER_DECODER_FAMILIES
    weights = weight_bytes(build.model)
    results = []
    for batch in dict.fromkeys((1, workload.batch)):
        inputs = ab_build.prepare_inputs(
            session.workload_inputs(batch, workload.prompt_len), session.choice.torch_device, build
        )
        decoder = decoder_for(build, build.model, enc_dec, workload.new_tokens)
        timed, sized = iters, None
        sized_note = "up to " if session.budget_s is not None else ""
        what = (
            f"generations (batch {batch}, {workload.new_tokens} new tokens; {warmup} warmup, {sized_note}{iters} timed)"
        )
        with torch.inference_mode(), Progress(what, total=warmup + iters, unit="generation") as progress:
            for done in range(warmup):
                one = functools.partial(generate, decoder, inputs, workload.new_tokens, session.sync, enc_dec)
                _, call_ms = clocked(one, session.sync)
                if done == 0 and session.budget_s is not None:  # the calibration call (ab_runtime/sizing.py)
                    sized = sizing.size(call_ms / 1000, warmup, iters, session.budget_s)
                    timed = sized.iterations
                    progress.total = warmup + timed
                progress.advance()
            probe = session.calibration_probe()
            torch.manual_seed(session.spec.recipe.seed)
            ab_device.reset_peak_memory(session.choice)
            runs, probe_ms = [], []
            for _ in range(timed):  # each generation followed by one calibration probe call
                runs.append(generate(decoder, inputs, workload.new_tokens, session.sync, enc_dec))
                probe_ms.append(probe())
                progress.advance()
        peak = ab_device.peak_memory(session.choice)
        last = runs[-1]
        kv_read = (last.cache_after_prefill + last.cache_final) // 2
        figures = generation_figures([r.ttft_ms for r in runs], [r.steps_ms for r in runs], batch)
        entry: dict[str, Any] = {
            "batch": batch,
            "prompt_len": workload.prompt_len,
            "new_tokens": workload.new_tokens,
            "warmup": warmup,
            "iterations": timed,
            **({"sizing": sized.record()} if sized is not None else {}),
            "ttft_samples_ms": [r.ttft_ms for r in runs],
            "decode_steps_ms": [r.steps_ms for r in runs],
            **figures,
            "peak_memory_bytes": peak if peak is not None else ab_device.host_peak_rss(),
            "peak_memory_source": "device_allocator" if peak is not None else "host_peak_rss",
            "kv_cache_bytes": last.cache_final,
            "weight_bytes": weights,
            "bytes_per_decode_step": weights + kv_read,
            "decode_bandwidth_gbs": decode_bandwidth_gbs(weights + kv_read, figures["tpot_ms"]["median_ms"]),
            "tokens": last.tokens,
            "calibration": calibration.calibration_block(
                fastest_steps([r.steps_ms for r in runs]), probe_ms, warmup, GENERATION_PAIRED_WITH
            ),
        }
        if enc_dec:
            entry["encoder_samples_ms"] = [r.encoder_ms for r in runs]
            entry["encoder_ms"] = stats(entry["encoder_samples_ms"])
        results.append(entry)
    first = results[0]
    agreement = divergence(first["tokens"][0], reference_tokens) if reference_tokens is not None else None
    return {
        "runs": results,
        "greedy_vs_reference": agreement,
        "reference_tokens": reference_tokens,
        "headline": {
            "tpot_ms": first["tpot_ms"]["median_ms"],
            "tokens_per_s": first["tokens_per_s"],
            "ttft_ms": first["ttft_ms"]["median_ms"],
            "batch_tokens_per_s": results[-1]["tokens_per_s"],
            "batch": results[-1]["batch"],
            "decode_bandwidth_gbs": first["decode_bandwidth_gbs"],
            "peak_memory_bytes": max(r["peak_memory_bytes"] for r in results),
        },
    }


def reference_tokens(session: Any, workload: Workload) -> list[int]:
    """The CPU float32 reference's batch-1 greedy tokens (the answer a port is compared with)."""
    enc_dec = session.spec.task_family in ENCODER_DECODER_FAMILIES
    build = ab_build.Build(session.reference, "cpu", torch.float32, "float32")
    inputs = session.workload_inputs(1, workload.prompt_len)
    with torch.inference_mode():
        run = generate(HFDecoder(build, session.reference, enc_dec), inputs, workload.new_tokens, lambda: None, enc_dec)
    return run.tokens[0]


def is_out_of_memory(exc: BaseException) -> bool:
    return isinstance(exc, torch.OutOfMemoryError) or "out of memory" in str(exc).lower()


def measure_sweep(
    session: Any,
    build: ab_build.Build,
    run: Callable[[dict[str, Any]], Any],
    workload: Workload,
    warmup: int,
    iters: int,
) -> dict[str, Any]:
    """Latency and throughput per batch of the sweep, stopping at the first batch out of memory."""
    from . import device as ab_device

    points: list[dict[str, Any]] = []
    stopped = None
    with Progress("batch sweep", total=len(workload.sweep), unit="batch") as progress:
        for batch in progress.over(workload.sweep):
            inputs = ab_build.prepare_inputs(session.workload_inputs(batch, None), session.choice.torch_device, build)
            ab_device.reset_peak_memory(session.choice)
            try:
                measured, probe_ms = session.time_calibrated(functools.partial(run, inputs), warmup, iters)
                timing = measured.as_dict()
            except RuntimeError as exc:
                if not is_out_of_memory(exc):
                    raise
                ab_device.empty_cache(session.choice)
                stopped = f"batch {batch}: out of memory"
                progress.finish(f"stopped at {stopped}")
                break
            peak = ab_device.peak_memory(session.choice)
            points.append(
                {
                    "batch": batch,
                    "samples_ms": timing["samples_ms"],
                    "warmup": warmup,
                    "median_ms": timing["median_ms"],
                    "p90_ms": timing["p90_ms"],
                    "min_ms": timing["min_ms"],
                    "stdev_ms": timing["stdev_ms"],
                    "samples_per_s": batch * 1000.0 / timing["median_ms"],
                    "peak_memory_bytes": peak if peak is not None else ab_device.host_peak_rss(),
                    "peak_memory_source": "device_allocator" if peak is not None else "host_peak_rss",
                    "calibration": calibration.calibration_block(timing["samples_ms"], probe_ms, warmup, "samples_ms"),
                    **({"sizing": timing["sizing"]} if "sizing" in timing else {}),
                }
            )
    if not points:
        raise RuntimeError(f"the batch sweep ran out of memory at its first batch ({stopped})")
    best = knee(points)
    at_knee = next(p for p in points if p["batch"] == best)
    return {
        "points": points,
        "stopped": stopped,
        "knee_batch": best,
        "knee_fraction": KNEE_FRACTION,
        "headline": {
            "batch1_latency_ms": points[0]["median_ms"] if points[0]["batch"] == 1 else None,
            "throughput_samples_per_s": max(p["samples_per_s"] for p in points),
            "knee_samples_per_s": at_knee["samples_per_s"],
            "peak_memory_bytes": max(p["peak_memory_bytes"] for p in points),
        },
    }


WORKLOAD_SCHEMA = "ascendbridge.workload/1"


def measure(
    session: Any, build: ab_build.Build, run: Callable[[dict[str, Any]], Any], warmup: int, iters: int
) -> dict[str, Any] | None:
    """The session's workload measured on `build` (None for `forward`: the accuracy run covers it)."""
    workload = session.workload
    body: dict[str, Any] = {"schema": WORKLOAD_SCHEMA, "workload": workload.as_dict(), "profiler_during_timing": False}
    if workload.name in ("generation", "encoder_generation"):
        with phase("accuracy"), Progress("greedy tokens of the CPU float32 reference"):
            reference = reference_tokens(session, workload)
        with phase("measurement"):
            body.update(measure_generation(session, build, workload, warmup, iters, reference))
    elif workload.name == "batch_sweep":
        with phase("measurement"):
            body.update(measure_sweep(session, build, run, workload, warmup, iters))
    else:
        return None
    return body


def headline_call(session: Any, build: ab_build.Build, run: Callable[[dict[str, Any]], Any]) -> Callable[[], Any]:
    """One unit of the workload's headline figure, for the optimizer's paired timing: for
    generation workloads a greedy generation of N tokens at batch 1 and one at the workload's
    larger batch (dominated by decode, so TPOT and batch tokens/s decide: a shape-specialised
    decode pass that wins at batch 1 but loses at the batch a team serves at is not kept), a
    forward at `headline_batch` for a batch sweep, else the accuracy forward."""
    workload = session.workload
    if workload.name in ("generation", "encoder_generation"):
        enc_dec = session.spec.task_family in ENCODER_DECODER_FAMILIES
        batches = sorted({1, workload.batch})
        inputs = [
            ab_build.prepare_inputs(session.workload_inputs(b, workload.prompt_len), session.choice.torch_device, build)
            for b in batches
        ]
        decoder = decoder_for(build, build.model, enc_dec, workload.new_tokens)

        def both_batches() -> GenerationRun:  # the batch-1 run is returned: its tokens are judged
            runs = [generate(decoder, batch, workload.new_tokens, lambda: None, enc_dec) for batch in inputs]
            return runs[0]

        return both_batches
    if workload.name == "batch_sweep":
        sweep_inputs = ab_build.prepare_inputs(
            session.workload_inputs(workload.headline_batch, None), session.choice.torch_device, build
        )
        return lambda: run(sweep_inputs)
    return session.timed_call(build, run)
