"""The one measurement harness: a Session loads, casts, builds inputs, runs samples, times, records.

Everything that produces or checks evidence goes through this module: the benchmark run
(benchmark_run.py behind accuracy_run.py), the pass search and its confirmation (optimize.py),
the optimized run (perf_run.py behind accuracy_run_perf.py) and the gates' re-execution and
re-measurement (ascendbridge/gatekit/inner, optimization/inner, which load the FRAMEWORK's copy of this
package). So the code that times is the code the gates verify.

A Session holds the float32 CPU reference model (config-initialised and seeded, or real
weights), the seeded input samples, the float32 and float64 reference outputs and the baseline
dtype on the target device. `make(passes)` builds a variant from the reference weights with
the given catalogue passes applied (no passes: the benchmark's target model), so re-execution
and re-measurement rebuild exactly the configuration that was measured.
"""

from __future__ import annotations

import copy
import dataclasses
import datetime
import json
import os
import platform
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from . import build as ab_build
from . import calibration, families, loading, moe, pairstats, precision, sharding, workloads
from . import device as ab_device
from .comparator import Thresholds, compare_outputs, judge_optimized
from .errors import SpecError
from .fileops import atomic_path, sha256_file, write_text_atomic
from .inputs import forward_flags
from .measure import Timing, profiler_active, time_calibrated
from .memory import FP64_REFERENCE_MAX_BYTES
from .optimize import passes
from .outputs import OUTPUTS_FORMAT
from .phases import phase
from .progress import Progress
from .spec import RunSpec, load_spec

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
RETAKES = 4  # re-timings of a CPU block without a clean call on both sides (paired); tens of ms a block
# A block whose every call on both sides takes this long is not re-timed for a context switch (paired):
# one preemption (a scheduler slice, a few ms) is about 1 % of such a call, while a call of seconds (a
# 0.6 B model's forward, a generation) almost never runs without one, so every block was re-timed
# RETAKES times and a search's pair took minutes (Qwen3-0.6B: a generation pair ~5 min).
LONG_CALL_MS = 500.0
LOAD_COUNTS = ("retaken_blocks", "unclean_blocks", "uneven_blocks")  # what the load cost a paired measurement
UNEVEN, EVEN, CLEAN = 0, 1, 2  # a block's rank (paired): clean on one side only, on neither, on both
CONFIG_KEYS = (
    "model_type",
    "hidden_size",
    "d_model",
    "n_embd",
    "num_hidden_layers",
    "num_layers",
    "n_layer",
    "encoder_layers",
    "decoder_layers",
    "num_attention_heads",
    "n_head",
    "intermediate_size",
    "d_ff",
    "vocab_size",
    "max_position_embeddings",
    "image_size",
    "patch_size",
    "num_channels",
    "is_encoder_decoder",
    "num_key_value_heads",
    "head_dim",
)


class HarnessError(Exception):
    """A bad argument or an impossible request: one line on stderr, no traceback."""


def say(message: str) -> None:
    print(message, flush=True)


@dataclass
class Session:
    """Model, inputs, reference outputs and baseline dtype shared by every run of one process."""

    spec: Any
    spec_path: Path
    choice: Any
    family: Any
    reference: torch.nn.Module  # float32 on CPU: the weights every variant starts from
    baseline_dtype: torch.dtype
    samples: list[dict[str, Any]]
    reference_out: dict[str, torch.Tensor]
    fp64_out: dict[str, torch.Tensor] | None
    fp64_note: str
    thresholds: Thresholds
    mode: str
    loaded: Any
    workload: workloads.Workload
    shard: sharding.ShardPlan | None = None  # the claimed cards of a model larger than one device
    device_map: dict[str, str] | None = None  # where make() placed the last variant's modules
    probe: Callable[[], float] | None = None  # the calibration probe on this device (calibration_probe)
    budget_s: float | None = None  # seconds one timing may spend (ab_runtime/sizing.py); None: the counts asked

    @property
    def baseline_dtype_name(self) -> str:
        return ab_build.DTYPE_NAMES[self.baseline_dtype]

    def sync(self) -> None:
        ab_device.synchronize(self.choice)

    def make(self, chosen: list[passes.Pass]) -> tuple[ab_build.Build, Callable[[dict[str, Any]], Any], float]:
        """A fresh variant from the reference weights: (build, run, seconds to build it; the run's
        `compile` phase)."""
        start = time.perf_counter()
        with phase("compile"), Progress(f"building a variant ({', '.join(p.name for p in chosen) or 'no passes'})"):
            model, self.device_map = place_target(
                self.reference, self.spec, self.choice, self.shard, self.baseline_dtype
            )
            flags = forward_flags(model)
            b = passes.build(model, chosen, self.choice.kind, self.baseline_dtype)
            run = ab_build.finalize(b, flags)
        return b, run, time.perf_counter() - start

    def outputs(
        self, b: ab_build.Build, run: Callable[[dict[str, Any]], Any], role: str = "target"
    ) -> dict[str, torch.Tensor]:
        """Every sample forwarded; each named output stacked over samples (dim 0), on CPU (the
        `accuracy` phase: what these outputs are for); `role` names the run in its progress lines."""
        per_name: dict[str, list[torch.Tensor]] = {}
        what = f"accuracy samples ({role}, {b.device_kind} {b.accuracy_dtype})"
        progress = Progress(what, total=len(self.samples), unit="sample")
        with torch.inference_mode(), phase("accuracy"), progress:
            for inputs in progress.over(self.samples):
                moved = ab_build.prepare_inputs(inputs, self.choice.torch_device, b)
                named = self.family.named_outputs(
                    run(moved),
                    moved,
                    self.spec.sentence_transformers_pooling,
                    self.spec.sentence_transformers_normalize,
                    self.loaded.config,
                )
                for name, tensor in named.items():
                    per_name.setdefault(name, []).append(tensor.detach().to("cpu"))
        stacked = {}
        for name, tensors in per_name.items():
            if len({tuple(t.shape) for t in tensors}) != 1:
                raise HarnessError(f"output '{name}' changes shape between samples; cannot stack")
            stacked[name] = torch.stack(tensors)
        return stacked

    def accuracy(self, b: ab_build.Build, out: dict[str, torch.Tensor]) -> dict[str, Any]:
        """The benchmark's verdict: the framework's accuracy standard for the dtype computed in."""
        return compare_outputs(out, self.reference_out, self.thresholds, b.accuracy_dtype, self.fp64_out)

    def judge_optimized(self, b: ab_build.Build, out: dict[str, torch.Tensor]) -> dict[str, Any]:
        """An optimized configuration's verdict: the one optimization budget against the float32
        reference (comparator.judge_optimized), never the standard of the dtype its passes use."""
        return judge_optimized(
            out, self.reference_out, self.spec.task_family, b.accuracy_dtype, self.thresholds.tolerances
        )

    def workload_inputs(self, batch: int, seq_len: int | None) -> dict[str, torch.Tensor]:
        """Seeded inputs of the family at another batch (and prompt length), for the workloads."""
        recipe = dataclasses.replace(self.spec.recipe, batch_size=batch, **({"seq_len": seq_len} if seq_len else {}))
        return self.family.build_inputs(self.reference, self.loaded.config, recipe, recipe.seed)

    def headline_call(self, b: ab_build.Build, run: Callable[[dict[str, Any]], Any]) -> Callable[[], Any]:
        """What the optimizer times: one unit of the workload's headline figure (workloads.headline_call)."""
        return workloads.headline_call(self, b, run)

    def timed_call(self, b: ab_build.Build, run: Callable[[dict[str, Any]], Any]) -> Callable[[], Any]:
        inputs = ab_build.prepare_inputs(self.samples[0], self.choice.torch_device, b)
        return lambda: run(inputs)

    def reference_call(self) -> Callable[[], Any]:
        """Sample 0 through the CPU float32 reference (the benchmark's reference timing)."""
        inputs = {k: v for k, v in self.samples[0].items()}
        flags = forward_flags(self.reference)
        return lambda: self.reference(**inputs, **flags)

    def time(self, fn: Callable[[], Any], warmup: int, iters: int, on_device: bool = True) -> Timing:
        """Same seed, warmup and iterations for every timed run (the RNG is re-seeded after warmup);
        the timed calls sized to the session's budget, if it has one."""
        seed = self.spec.recipe.seed
        torch.manual_seed(seed)
        sync = self.sync if on_device else (lambda: None)
        return time_calibrated(fn, None, sync, warmup, iters, seed=seed, budget_s=self.budget_s)[0]

    def calibration_probe(self) -> Callable[[], float]:
        """The fixed calibration probe on the target's device (ab_runtime/calibration.py), built once."""
        if self.probe is None:
            self.probe = calibration.make_probe(self.choice.torch_device, self.sync)
        return self.probe

    def time_calibrated(self, fn: Callable[[], Any], warmup: int, iters: int) -> tuple[Timing, list[float]]:
        """`time` on the device with one calibration probe call after every timed call:
        (timing, probe samples), so a gate can judge the timing relative to the probe."""
        seed = self.spec.recipe.seed
        torch.manual_seed(seed)
        return time_calibrated(
            fn, self.calibration_probe(), self.sync, warmup, iters, seed=seed, budget_s=self.budget_s
        )


def load_reference(spec: Any, choice: Any, use_pretrained: bool) -> loading.LoadedModel:
    """The float32 CPU reference every run compares with: real weights, or config-initialised
    from the recipe's seed (the same weights in every process)."""
    torch.manual_seed(spec.recipe.seed)
    cpu = choice if choice.kind == "cpu" else ab_device.select_device("cpu")
    loaded = loading.load_model(spec, dry_run=not use_pretrained, device=cpu, dtype=torch.float32)
    loaded.model.eval()
    return loaded


def place_target(
    reference: torch.nn.Module, spec: Any, choice: Any, shard: sharding.ShardPlan | None, dtype: torch.dtype
) -> tuple[torch.nn.Module, dict[str, str] | None]:
    """A copy of the reference weights in `dtype` with the spec's float32 islands, on the device
    (or spread over the claimed cards): the target model every run measures."""
    model = copy.deepcopy(reference).to(dtype=dtype)
    precision.keep_in_fp32(model, list(spec.keep_fp32_modules), dtype)
    return sharding.place(model, choice, shard, dtype)


def open_session(
    spec_path: Path,
    device: str,
    use_pretrained: bool,
    num_samples: int,
    dtype: str | None = None,
    workload: str | None = None,
) -> Session:
    """Build the reference model, the seeded samples and the float32 / float64 reference outputs;
    `workload` overrides the spec's workload profile (the team lead's benchmark.workload)."""
    spec = load_spec(Path(spec_path))
    try:
        profile = workloads.resolve(spec.task_family, spec.workload, workload)
    except SpecError as exc:
        raise HarnessError(str(exc)) from None
    choice = ab_device.select_device(device, allow_fallback=False)
    family = families.get_family(spec.task_family)
    baseline_name = dtype or spec.dtype_target
    if baseline_name not in DTYPES:
        raise HarnessError(f"dtype '{baseline_name}' is not supported (choices: {', '.join(sorted(DTYPES))})")
    loaded = load_reference(spec, choice, use_pretrained)
    reference = loaded.model
    cpu = choice if choice.kind == "cpu" else ab_device.select_device("cpu")
    samples = [
        family.build_inputs(reference, loaded.config, spec.recipe, spec.recipe.seed + i) for i in range(num_samples)
    ]
    tolerances = json.loads(Path(spec_path).read_text()).get("tolerances") or {}
    session = Session(
        spec,
        Path(spec_path),
        choice,
        family,
        reference,
        DTYPES[baseline_name],
        samples,
        {},
        None,
        "built",
        Thresholds.from_spec(tolerances, spec.task_family),
        loaded.mode,
        loaded,
        profile,
        sharding.plan_for(spec.device_plan, choice),
    )
    cpu_session = copy.copy(session)
    cpu_session.choice = cpu
    ref_build = ab_build.Build(reference, "cpu", torch.float32, "float32")
    session.reference_out = cpu_session.outputs(
        ref_build, ab_build.finalize(ref_build, forward_flags(reference)), "reference"
    )
    if sum(p.numel() for p in reference.parameters()) * 8 <= FP64_REFERENCE_MAX_BYTES:
        session.fp64_out, session.fp64_note = _fp64_reference(cpu_session, reference)
    else:
        session.fp64_note = f"skipped: a float64 copy would exceed {FP64_REFERENCE_MAX_BYTES // 1024**3} GiB"
    return session


def _fp64_reference(cpu_session: Session, reference: torch.nn.Module) -> tuple[dict[str, torch.Tensor] | None, str]:
    """The float64 outputs, or None with the reason when the model cannot run in float64 (XGLM's
    finfo(float64).min mask meets a float32 buffer; GptOss's grouped expert matmul has no double
    kernel): the comparison then goes on against the float32 reference alone."""
    exact = copy.deepcopy(reference).to(torch.float64)
    eager = moe.float64_path(exact)  # MoE: experts run eagerly, so the float64 reference exists
    b64 = ab_build.Build(exact, "cpu", torch.float64, "float64")
    try:
        return cpu_session.outputs(
            b64, ab_build.finalize(b64, forward_flags(exact)), "exact reference"
        ), f"built ({eager})" if eager else "built"
    except (RuntimeError, TypeError, ValueError) as exc:  # the model's own code refusing float64
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        operator = precision.operator_from_traceback(exc)
        return None, (
            f"failed: {type(exc).__name__}: {first}"
            + (f" (in {operator})" if operator else "")
            + "; compared against the float32 reference only"
        )
    finally:
        del exact


def load_retimed(session: Session) -> bool:
    """Whether a timing the load interrupted is taken again (paired's retakes, the search's set-aside
    pairs): on a CPU only, since an accelerator's synchronisation may sleep, a switch on every call."""
    return session.choice.kind == "cpu"


def paired(
    session: Session,
    base: Callable[[], Any],
    cand: Callable[[], Any],
    pairs: int,
    warmup: int,
    iters: int,
    first_block: int = 0,
) -> dict[str, Any]:
    """`pairs` blocks of `iters` A/B call pairs, interleaved A B B A A B ... so both sides see the
    same load; the same warmup for both, the RNG re-seeded before every call, the profiler off.
    The interleaving runs on across blocks (with odd `iters` each block opens with the other
    side); `first_block` is the index of the first one, so a caller that times one block at a
    time (optimize.sequential_paired) keeps the sides taking turns at opening a block.

    On a CPU a block is timed again (at most RETAKES times) until both sides ran at least one call
    no context switch interrupted (calibration.quiet_calls): a block figure is its side's fastest
    call, and a call that waited for the scheduler measures the load. Beside busy loops a
    tiny-bert-classifier eager call (3 ms) is preempted where its compiled candidate (2.2 ms) often
    is not: such uneven blocks read x4-x5, blocks with a clean call on both sides x1.2-x1.6 (150
    pairs beside 3 CPU + 2 memory-copy loops), and blocks with none on either side anything from
    x0.4 to x3.5 (each side's figure is its call plus a random wait). A confirmation once claimed
    x4.1 that way and the perf gate, re-measuring x1.8, failed it. Of the tries the first clean one
    is kept, else the first even one (both sides interrupted throughout), else the last. A block
    whose calls all take LONG_CALL_MS or more counts as clean: at that length a preemption is noise,
    and a clean call of seconds almost never happens.
    `retaken_blocks` counts the re-timings; `unclean_blocks` and `uneven_blocks` the blocks kept
    without a clean call on both sides, and of those the uneven ones."""
    if profiler_active():
        raise HarnessError("a profiler is active: timing with the profiler on is not allowed")
    seed = session.spec.recipe.seed
    retakes = RETAKES if load_retimed(session) else 0
    base_switches: list[int] = []
    cand_switches: list[int] = []
    counted_base, counted_cand = (
        calibration.quiet_calls(base, base_switches),
        calibration.quiet_calls(cand, cand_switches),
    )

    def timed(fn: Callable[[], Any]) -> float:
        torch.manual_seed(seed)
        session.sync()
        start = time.perf_counter_ns()
        fn()
        session.sync()
        return (time.perf_counter_ns() - start) / 1e6

    def block(i: int) -> tuple[list[float], list[float], int]:
        """One block of `iters` interleaved call pairs, and its rank (UNEVEN, EVEN or CLEAN)."""
        base_switches.clear()
        cand_switches.clear()
        base_ms: list[float] = []
        cand_ms: list[float] = []
        for j in range(iters):
            if (i * iters + j) % 2 == 0:
                base_ms.append(timed(counted_base))
                cand_ms.append(timed(counted_cand))
            else:
                cand_ms.append(timed(counted_cand))
                base_ms.append(timed(counted_base))
        if min(base_ms) >= LONG_CALL_MS and min(cand_ms) >= LONG_CALL_MS:  # a slice is noise at this length
            return base_ms, cand_ms, CLEAN
        sides = (0 in base_switches, 0 in cand_switches)
        return base_ms, cand_ms, CLEAN if all(sides) else EVEN if not any(sides) else UNEVEN

    base_blocks: list[list[float]] = []
    cand_blocks: list[list[float]] = []
    retaken = unclean = uneven = 0
    what = f"paired measurement ({iters} call pairs a block)"
    with torch.inference_mode(), Progress(what, total=pairs, unit="block") as progress:
        with phase("warmup"):
            for fn in (base, cand):
                for _ in range(warmup):
                    fn()
            session.sync()
        with phase("measurement"):
            for i in range(first_block, first_block + pairs):
                kept = block(i)
                for _ in range(retakes):
                    if kept[2] == CLEAN:
                        break
                    retaken += 1
                    again = block(i)
                    if again[2] > kept[2] or again[2] == kept[2] == UNEVEN:  # a better rank, or the last uneven try
                        kept = again
                unclean += kept[2] != CLEAN
                uneven += kept[2] == UNEVEN
                base_blocks.append(kept[0])
                cand_blocks.append(kept[1])
                progress.advance()
    figures = pairstats.summarize_pairs(base_blocks, cand_blocks, warmup).as_dict()
    return {**figures, **dict(zip(LOAD_COUNTS, (retaken, unclean, uneven)))}


def first_call_ms(session: Session, fn: Callable[[], Any]) -> float:
    """A variant's first call (its cold start: where torch.compile compiles), in the `compile` phase."""
    with torch.inference_mode(), phase("compile"), Progress("first call (where torch.compile compiles)"):
        session.sync()
        start = time.perf_counter_ns()
        fn()
        session.sync()
    return (time.perf_counter_ns() - start) / 1e6


def model_summary(session: Session) -> dict[str, Any]:
    """Parameter counts and the config figures the roofline estimate needs."""
    model, loaded = session.reference, session.loaded
    embedding = sum(p.numel() for m in model.modules() if isinstance(m, torch.nn.Embedding) for p in m.parameters())
    config = getattr(model, "config", None)
    cfg = {
        k: getattr(config, k)
        for k in CONFIG_KEYS
        if config is not None and isinstance(getattr(config, k, None), (int, float, str, bool))
    }
    return {
        "class": type(model).__name__,
        "parameters": sum(p.numel() for p in model.parameters()),
        "embedding_parameters": embedding,
        "layers_built": loaded.layers_built,
        "layers_total": loaded.layers_total,
        "depth_reduced": bool(loaded.depth_reduced),
        "proxy": loaded.proxy,
        "origin": loaded.origin,
        "notes": list(loaded.notes),
        "config": cfg,
    }


def record_header(schema: str, spec: RunSpec) -> dict[str, Any]:
    """The fields every evidence record of a run opens with: its schema, when, and whose model."""
    return {
        "schema": schema,
        "created_at": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "model_id": spec.model_id,
        "adaptation": spec.name,
        "task_family": spec.task_family,
    }


def environment(session: Session) -> dict[str, Any]:
    """Versions, device and the process placement (torch / OMP threads, the cores it may run on)
    every evidence file records: a gate run by hand re-times with the same placement."""
    return environment_of(session.choice, session.shard, session.device_map)


def environment_of(choice: Any, shard: sharding.ShardPlan | None, device_map: dict[str, str] | None) -> dict[str, Any]:
    """`environment` of a run that holds no Session (the business run)."""
    try:
        import transformers

        tf_version: str | None = transformers.__version__
    except ImportError:
        tf_version = None
    return {
        "torch": torch.__version__,
        "torch_npu": choice.torch_npu_version,
        "transformers": tf_version,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "device_name": choice.name,
        "device_env": ab_device.device_env(),
        "torch_threads": torch.get_num_threads(),
        "cpu_affinity": sorted(os.sched_getaffinity(0)),
        "omp_num_threads": os.environ.get("OMP_NUM_THREADS"),
        "sharding": shard.evidence(device_map or {}) if shard else None,
    }


def input_shapes(session: Session) -> dict[str, Any]:
    return {
        k: {"shape": list(v.shape), "dtype": str(v.dtype).replace("torch.", "")}
        for k, v in session.samples[0].items()
        if isinstance(v, torch.Tensor)
    }


def saved_inputs(session: Session) -> dict[str, torch.Tensor]:
    return {k: v for k, v in session.samples[0].items() if isinstance(v, torch.Tensor)}


def save_outputs(path: Path, record: dict[str, Any]) -> str:
    """torch.save `record` atomically at `path`; returns the file's sha256 for the metrics file."""
    with atomic_path(path) as tmp:
        torch.save(record, tmp)
    return sha256_file(path)


def save_run_outputs(
    session: Session,
    path: Path,
    dtype: str,
    dataset: str,
    target: dict[str, torch.Tensor],
    chosen: list[str],
    **extra: Any,
) -> str:
    """A measured run's outputs file (ab_runtime/outputs.py's format): the target's outputs beside the
    float32 and float64 references' on the saved inputs, with the passes that made them; its sha256."""
    record = {
        "format": OUTPUTS_FORMAT,
        "device": session.choice.kind,
        "dtype": dtype,
        "mode": session.mode,
        "dataset": dataset,
        "target": target,
        "reference": session.reference_out,
        "reference_fp64": session.fp64_out,
        "passes": list(chosen),
        "inputs": saved_inputs(session),
    }
    return save_outputs(path, {**record, **extra})


def run_record(session: Session, requested: str, dtype: str, dataset: str, num_samples: int) -> dict[str, Any]:
    """A metrics file's `run`: the device asked for and the one used, the dtype, mode, dataset and
    seed, and the reference the run compared against."""
    choice = session.choice
    return {
        "device": choice.kind,
        "device_requested": requested,
        "torch_device": choice.torch_device,
        "device_name": choice.name,
        "fallback": choice.fallback,
        "dtype": dtype,
        "mode": session.mode,
        "dataset": dataset,
        "num_samples": num_samples,
        "seed": session.spec.recipe.seed,
        "reference": {"device": "cpu", "dtype": "float32", "float64": session.fp64_out is not None},
    }


def write_json(path: Path, data: dict[str, Any]) -> None:
    write_text_atomic(path, json.dumps(data, indent=2, sort_keys=True) + "\n")
