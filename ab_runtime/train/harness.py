"""The training harness: one step loop for a single process, DDP and FSDP2 (under torchrun).

A Trainer builds the model from its directory with a fixed seed, packs the corpus, and runs steps
with the precision policy (float32 master weights, bf16 autocast when asked; bf16 weights when the
float32 training state is above a size: choose_precision), the parallel strategy (choose_strategy:
one process, DDP, FSDP2, or one process over several devices through a device_map), AdamW from the
device layer, a token-sum loss divided by the global token count (so a batch split over ranks or
into accumulated micro-batches trains like one process), an out-of-memory ladder (halve the
micro-batch and retry the step), heartbeats, guards (non-finite loss, loss spike, free disk) and
checkpoints through torch.distributed.checkpoint: model, optimizer, every rank's RNG states, the
step and the data position, written to a temporary directory, digested, then renamed.

The Trainer is composed of parts, each its own module: the data (data.py), the torchrun job and the
model's wrapping (distributed.py), the guards, the out-of-memory ladder and the injected faults
(guards.py), the checkpoints (checkpoint.py). This module keeps the config, the precision and
strategy rules, the model build and the step loop.
"""

from __future__ import annotations

import json
import math
import os
import random
import time
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Any

import torch
from torch import nn

from ..depth import proxy_config
from ..device import (
    DeviceChoice,
    accelerator_indices,
    adamw_class,
    device_total_memory,
    host_peak_rss,
    peak_memory,
    select_device,
    synchronize,
)
from ..errors import SpecError
from ..fileops import write_text_atomic
from ..memory import BF16_BYTES, FP32_BYTES, HEADROOM, TRAINED_COPIES, host_available_memory, training_bytes
from ..progress import Progress
from ..sharding import ShardPlan, place
from . import corpus
from .checkpoint import CheckpointPart, rng_state, set_rng_state
from .config import BF16_WEIGHTS, TrainConfig
from .data import prepare_data
from .distributed import DistributedPart, all_sum, full, init_distributed, rank_and_world
from .guards import GuardsPart, heartbeat, is_out_of_memory
from .lora import ADAPTER_MARK, apply_lora
from .paradigm import IGNORE, Paradigm, correct_predictions, make_batch, paradigm_of, predicted_labels, token_loss_sum

GIB = 2.0**30


def choose_precision(
    asked: str, trainable: int, frozen: int, memory: int | None, devices: int, above: float | None
) -> tuple[str, str]:
    """(precision, reason): the asked one (float32 master weights, bf16 autocast if asked) while the
    float32 training state fits `above` x the memory of the job's `devices` devices; above that,
    bf16 weights (weights, gradients and AdamW moments in bfloat16: half the bytes). Rule off with
    `above` None; kept with the memory unknown."""
    if above is None or memory is None:
        return asked, "float32 master weights: " + (
            "the size rule is off" if above is None else "device memory unknown"
        )
    need, room = training_bytes(trainable, frozen), above * memory * devices
    where = f"{above:g} x {devices} x {memory / GIB:.1f} GiB of device memory"
    if need <= room:
        return asked, f"float32 master weights: about {need / GIB:.2f} GiB of float32 training state is within {where}"
    return BF16_WEIGHTS, (
        f"bf16 weights: about {need / GIB:.2f} GiB of float32 training state is above {where} "
        f"(bfloat16 needs about {training_bytes(trainable, frozen, BF16_BYTES) / GIB:.2f} GiB)"
    )


def choose_strategy(
    trainable: int, frozen: int, memory: int | None, world: int, devices: int = 1, weight_bytes: int = FP32_BYTES
) -> tuple[str, str]:
    """(strategy, reason) for `world` processes with `memory` bytes a device (None: unknown) and
    `devices` devices visible to one process: one process runs alone while the model fits one
    device, else spreads its layers over the devices (device_map); several replicate the model
    (DDP) while it fits one device, else shard it (FSDP2); what does not fit is refused with the figures."""
    need = training_bytes(trainable, frozen, weight_bytes)
    fits = memory is None or need <= memory
    if world == 1:
        if fits:
            return "single", f"one process; about {need / GIB:.2f} GiB of training state"
        if devices > 1 and memory is not None and need <= memory * devices:
            return "device_map", (
                f"about {need / GIB:.1f} GiB does not fit one device ({memory / GIB:.1f} GiB): "
                f"one process spreads its layers over {devices} devices (device_map)"
            )
        raise SpecError(
            f"training needs about {need / GIB:.1f} GiB, {devices} device(s) of {(memory or 0) / GIB:.1f} GiB cannot "
            "hold it; start it with torchrun over more devices (FSDP2 shards it)"
        )
    if fits:
        return "ddp", f"about {need / GIB:.2f} GiB fits one device: every rank holds a replica (DDP)"
    if memory is not None and need / world <= memory:
        return (
            "fsdp2",
            f"about {need / GIB:.1f} GiB does not fit one device ({memory / GIB:.1f} GiB): sharded over {world} ranks (FSDP2)",
        )
    raise SpecError(
        f"training needs about {need / GIB:.1f} GiB, {world} devices of {(memory or 0) / GIB:.1f} GiB cannot hold it "
        "even sharded (FSDP2)"
    )


def deterministic(seed: int) -> None:
    """Seed every generator and ask torch for deterministic kernels (the contract's premise)."""
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    random.seed(seed)
    torch.manual_seed(seed)
    torch.use_deterministic_algorithms(True)


@contextmanager
def uninitialized_fill(on: bool) -> Iterator[None]:
    """Deterministic mode fills every new tensor with NaN so that a read of uninitialized memory
    shows (torch.utils.deterministic.fill_uninitialized_memory); on a CPU that fill was a quarter of
    a 0.14 B model's step. Per step, since a pass search steps two trainers in one process."""
    flags = torch.utils.deterministic
    before = flags.fill_uninitialized_memory
    flags.fill_uninitialized_memory = on
    try:
        yield
    finally:
        flags.fill_uninitialized_memory = before


def build_model(
    config_dir: Path, seed: int, overrides: dict[str, Any], proxy_depth: int | None = None
) -> tuple[nn.Module, Paradigm, Any]:
    """The model from its directory (weights when it has them, else a seeded random init); with
    `proxy_depth`, the registered reduced-depth proxy of it (the first layers' weights)."""
    import transformers

    config = transformers.AutoConfig.from_pretrained(config_dir)
    for key, value in overrides.items():
        if not hasattr(config, key):
            raise SpecError(f"config_overrides: the model config has no {key!r}")
        setattr(config, key, value)
    if proxy_depth:
        config, _ = proxy_config(config, proxy_depth)
    paradigm = paradigm_of(config)
    auto = getattr(transformers, paradigm.auto_class)
    torch.manual_seed(seed)
    has_weights = any(config_dir.glob("*.safetensors")) or any(config_dir.glob("pytorch_model*.bin"))
    with Progress("loading the model" if has_weights else "building the model (seeded random weights)"):
        model = (
            auto.from_pretrained(config_dir, config=config, dtype=torch.float32)
            if has_weights
            else auto.from_config(config, dtype=torch.float32)
        )
    return model, paradigm, config


def digest_parameters(model: nn.Module, rounded_to: torch.dtype | None = None) -> str:
    """sha256 over every parameter's bytes in name order (two runs' weights bit-identical or not);
    `rounded_to`: of the weights as that dtype holds them (float32 weights against bfloat16 ones)."""
    import hashlib

    digest = hashlib.sha256()
    for name, param in sorted(model.named_parameters()):
        value = full(param.detach())
        digest.update(name.encode())
        digest.update((value.to(rounded_to) if rounded_to else value).float().cpu().contiguous().numpy().tobytes())
    return digest.hexdigest()


class Trainer(DistributedPart, GuardsPart, CheckpointPart):
    """One run's model, optimizer, data and position; `step()` trains one global batch. Its parts:
    the distributed wrapping (distributed.py), the guards and injected faults (guards.py), the
    checkpoints (checkpoint.py); the data it trains on is data.py's."""

    def __init__(
        self, cfg: TrainConfig, out: Path, device: DeviceChoice | None = None, precision: str | None = None
    ) -> None:
        self.cfg, self.out = cfg, Path(out)
        self.out.mkdir(parents=True, exist_ok=True)
        self.device = device or select_device(cfg.device)
        self.precision = precision or cfg.precision
        init_distributed(self.device)
        self.rank, self.world = rank_and_world()
        if cfg.batch % self.world or (cfg.batch // self.world) % cfg.accumulation:
            raise SpecError(
                f"the global batch {cfg.batch} does not split over {self.world} rank(s) "
                f"x {cfg.accumulation} micro-batch(es)"
            )
        deterministic(cfg.seed)
        model, self.paradigm, self.model_config = build_model(
            Path(cfg.model_dir), cfg.seed, cfg.config_overrides, cfg.proxy_depth
        )
        self.adapted: list[str] = []
        self.adapted_reason = ""
        if cfg.method == "lora":
            model, self.adapted, self.adapted_reason = apply_lora(
                model, cfg.lora_rank, cfg.lora_alpha, tuple(cfg.lora_targets)
            )
        trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
        frozen = sum(p.numel() for p in model.parameters()) - trainable
        memory = device_total_memory(self.device) or host_available_memory()
        devices = len(accelerator_indices(self.device)) or 1
        # the job's devices: one a process, or those one process may spread its layers over
        job_devices = self.world if self.world > 1 else devices if cfg.strategy in ("auto", "device_map") else 1
        self.precision, self.precision_reason = choose_precision(
            self.precision, trainable, frozen, memory, job_devices, cfg.bf16_weights_above
        )
        if self.precision == BF16_WEIGHTS:
            model.to(torch.bfloat16)
        self.strategy, self.strategy_reason = cfg.strategy, "set in the training config"
        if cfg.strategy == "auto":
            self.strategy, self.strategy_reason = choose_strategy(
                trainable,
                frozen,
                memory,
                self.world,
                devices,
                BF16_BYTES if self.precision == BF16_WEIGHTS else FP32_BYTES,
            )
        if self.world > 1 and self.strategy in ("single", "device_map"):
            raise SpecError(f"{self.world} processes need strategy ddp, fsdp2 or auto, not {self.strategy}")
        self.device_map: dict[str, str] | None = None
        if self.strategy == "device_map":
            model, self.device_map = self._spread(model, memory, devices)
        else:
            model.to(self.device.torch_device)
        self.model = self._wrap(model)
        self.params = [p for p in self.model.parameters() if p.requires_grad]
        optimizer_cls, self.optimizer_reason = adamw_class(self.device, sharded=self.strategy == "fsdp2")
        self.optimizer = optimizer_cls(self.params, **self._optimizer_options(optimizer_cls))
        if "compile" in cfg.passes:
            self.core.compile()  # in place: the parameters keep their names (checkpoints, digests)
        self.data = prepare_data(cfg, self.paradigm, self.model_config)
        self.step_index = 0
        self.position = corpus.Position(0, 0)
        self.losses: list[float] = []
        self.checkpoint_bytes = 0
        self.last_grads: dict[str, torch.Tensor] = {}
        self.micro_batch = cfg.batch // self.world // cfg.accumulation  # halved by the out-of-memory ladder
        self.oom_fallbacks: list[dict[str, Any]] = []

    def _optimizer_options(self, optimizer_cls: Any) -> dict[str, Any]:
        """AdamW's arguments; the fused_adamw pass asks torch's AdamW for its fused kernel. The
        injected fault `wrong_fused_adamw` makes that pass wrong (it climbs the loss): the pass
        search must refuse it by its losses (tests)."""
        options: dict[str, Any] = {"lr": self.cfg.lr, "weight_decay": self.cfg.weight_decay}
        if "fused_adamw" in self.cfg.passes and optimizer_cls is torch.optim.AdamW:
            options["fused"] = True
            self.optimizer_reason += "; fused kernel (the fused_adamw pass)"
            if self.cfg.fault.get("wrong_fused_adamw"):
                options["maximize"] = True
        return options

    def _spread(self, model: nn.Module, memory: int | None, devices: int) -> tuple[nn.Module, dict[str, str]]:
        """(the model, its device map) over this process's accelerators through accelerate
        (ab_runtime.sharding, each card capped so its layers' training state fits); on a CPU or
        one card every module is on that device."""
        dtype = next(model.parameters()).dtype
        shard = None
        if devices > 1:
            share = (memory or 0) / (TRAINED_COPIES * HEADROOM) / GIB  # the weights' share of a card's memory
            shard = ShardPlan(self.device.kind, accelerator_indices(self.device), share or None)
        mode = model.training
        model, device_map = place(model, self.device, shard, dtype)
        return model.train(mode), device_map or {"": str(self.device.torch_device)}

    def autocast(self) -> Any:
        if self.precision == "bf16-autocast":
            return torch.autocast(self.device.kind if self.device.kind != "npu" else "npu", dtype=torch.bfloat16)
        return nullcontext()

    def lr_at(self, step: int) -> float:
        """Linear warm-up over `warmup` steps, then constant."""
        return self.cfg.lr * min(1.0, (step + 1) / self.cfg.warmup) if self.cfg.warmup else self.cfg.lr

    def _batch(self, blocks: list[Any], keys: list[int], seed: int) -> tuple[dict[str, torch.Tensor], torch.Tensor]:
        """(model inputs on the device, labels) of the blocks."""
        inputs, labels = make_batch(
            self.paradigm,
            blocks,
            keys,
            seed,
            int(self.model_config.vocab_size),
            self.data.mask_id,
            self.data.pad_id,
            self.data.special,
        )
        return {k: v.to(self.device.torch_device) for k, v in inputs.items()}, labels

    def _loss(self, inputs: dict[str, torch.Tensor], labels: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, Any]:
        """(token-loss sum, token count, logits) of one forward."""
        with self.autocast():
            logits = self.model(**inputs).logits
        loss_sum, count = token_loss_sum(self.paradigm, logits, labels)
        return loss_sum, count, logits

    def _forward_loss(
        self, blocks: list[Any], keys: list[int], seed: int
    ) -> tuple[torch.Tensor, torch.Tensor, Any, torch.Tensor]:
        """(token-loss sum, token count, logits, labels) of this rank's blocks."""
        inputs, labels = self._batch(blocks, keys, seed)
        loss_sum, count, logits = self._loss(inputs, labels)
        return loss_sum, count, logits, labels

    def step(self, keep_grads: bool = False) -> dict[str, Any]:
        """Train one global batch; returns the step's figures (the same on every rank).
        `keep_grads` keeps this step's gradients in `last_grads` (the contract's cosines)."""
        with uninitialized_fill(on="no_uninit_fill" not in self.cfg.passes):
            return self._step(keep_grads)

    def _step(self, keep_grads: bool) -> dict[str, Any]:
        cfg, step = self.cfg, self.step_index + 1
        self._maybe_hang(step)
        indices, position = corpus.next_batch(len(self.data.train), self.position, cfg.batch, cfg.seed)
        mine = indices[self.rank :: self.world]
        synchronize(self.device)
        start = time.perf_counter()
        for group in self.optimizer.param_groups:
            group["lr"] = self.lr_at(self.step_index)
        rng = rng_state()  # a retry after an out-of-memory error starts from the same random state
        fallbacks = 0
        while isinstance(accumulated := self._accumulate(mine, step), str):  # the step's memory is freed here
            self._fall_back(step, accumulated)
            fallbacks += 1
            set_rng_state(rng)
        loss_sum, total = accumulated
        grad_norm = float(full(torch.nn.utils.clip_grad_norm_(self.params, cfg.max_grad_norm)))
        mean_loss = float(all_sum(loss_sum) / total)
        self._guard(step, mean_loss, grad_norm)
        if keep_grads:
            self.last_grads = {
                name: full(p.grad.detach()).float().cpu().clone()
                for name, p in self.core.named_parameters()
                if p.grad is not None
            }
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        synchronize(self.device)
        elapsed = time.perf_counter() - start
        self.step_index, self.position = step, position
        self.losses.append(mean_loss)
        tokens = cfg.batch * cfg.seq_len
        figures = {
            "step": step,
            "epoch": position.epoch,
            "loss": mean_loss,
            "grad_norm": grad_norm,
            "lr": self.lr_at(step - 1),
            "tokens": tokens,
            "tokens_per_s": tokens / elapsed if elapsed else None,
            "step_time_s": elapsed,
            "peak_memory_bytes": peak_memory(self.device) or host_peak_rss(),
            "time": time.time(),
            "micro_batch": self.micro_batch,
            "accumulation": math.ceil(len(mine) / self.micro_batch),
            "oom_fallbacks": fallbacks,
        }
        self.beat("train")
        return figures

    def _accumulate(self, mine: list[int], step: int) -> tuple[torch.Tensor, torch.Tensor] | str:
        """Forward and backward of this rank's blocks in micro-batches of `micro_batch`, each loss
        divided by the global token count (counted before any forward), so the summed gradients
        equal one batch's. Returns (this rank's float64 loss sum, the global token count), or the
        error when any rank ran out of memory (the caller takes the ladder's rung)."""
        cfg = self.cfg
        chunks = [mine[start : start + self.micro_batch] for start in range(0, len(mine), self.micro_batch)]
        batches = [self._batch([self.data.train[i] for i in chunk], chunk, cfg.seed + step) for chunk in chunks]
        count = sum(int((predicted_labels(self.paradigm, labels) != IGNORE).sum()) for _, labels in batches)
        total = all_sum(torch.tensor(float(count), dtype=torch.float64, device=self.device.torch_device))
        loss_total = torch.zeros((), dtype=torch.float64, device=self.device.torch_device)
        error = ""
        for index, (inputs, labels) in enumerate(batches):
            try:
                with self._sync_gradients(index == len(batches) - 1):
                    loss_sum, _, _ = self._loss(inputs, labels)
                    if cfg.fault.get("nan_at_step") == step:
                        loss_sum = loss_sum * float("nan")
                    if cfg.fault.get("spike_at_step") == step:
                        loss_sum = loss_sum * 100.0
                    # DDP / FSDP2 average gradients over ranks: x world makes the mean a global sum
                    (loss_sum * (self.world / total.to(loss_sum.dtype))).backward()
                    self._maybe_oom(step, len(chunks[index]))
                loss_total += loss_sum.detach().to(torch.float64)
            except Exception as exc:  # only out-of-memory errors are answered; the rest propagate
                if not is_out_of_memory(exc):
                    raise
                error = str(exc).splitlines()[0][:300] if str(exc) else type(exc).__name__
                break
        if self.world > 1:  # every rank retries when one ran out (an OOM inside a collective hangs: the hang watch)
            failed = all_sum(torch.tensor(float(bool(error)), device=self.device.torch_device))
            error = error or ("another rank ran out of memory" if float(failed) else "")
        return error or (loss_total, total)

    def evaluate(self) -> dict[str, Any]:
        """Held-out loss (and perplexity for causal LM, masked accuracy for MLM), deterministic.
        Every rank evaluates every held-out block (FSDP2 needs all ranks in each forward), so the
        figures are the same on every rank and equal one process's."""
        self.model.eval()
        loss_sum, count, correct = 0.0, 0.0, 0
        blocks = self.data.held_out
        starts = range(0, len(blocks), self.cfg.batch)
        with torch.no_grad(), Progress("held-out evaluation", total=len(starts), unit="batch") as progress:
            for start in progress.over(starts):
                keys = list(range(start, min(start + self.cfg.batch, len(blocks))))
                part_sum, part_count, logits, labels = self._forward_loss(
                    [blocks[k] for k in keys], keys, self.cfg.seed - 1
                )
                loss_sum, count = loss_sum + float(part_sum), count + float(part_count)
                if self.paradigm.name == "masked_lm":
                    correct += correct_predictions(logits, labels)
        self.model.train()
        loss = loss_sum / count if count else math.nan
        result: dict[str, Any] = {"loss": loss, "tokens": count}
        if self.paradigm.name == "causal_lm":
            result["perplexity"] = math.exp(min(loss, 50.0))
        if self.paradigm.name == "masked_lm":
            result["masked_accuracy"] = correct / count if count else math.nan
        return result

    def optimizer_has_state(self) -> bool:
        return any(bool(state) for state in self.optimizer.state.values())

    def adapter_only_changed(self, before: dict[str, torch.Tensor]) -> dict[str, list[str]]:
        """Which parameters differ from `before` (names), split into adapters and the rest."""
        changed = [
            name for name, p in self.core.named_parameters() if not torch.equal(full(p.detach()).cpu(), before[name])
        ]
        return {
            "adapters": [n for n in changed if ADAPTER_MARK in n],
            "other": [n for n in changed if ADAPTER_MARK not in n],
        }

    def beat(self, phase: str) -> None:
        """The heartbeat the supervisor watches (guards.heartbeat)."""
        heartbeat(self.out, self.rank, self.step_index, phase)

    def snapshot(self) -> dict[str, torch.Tensor]:
        return {name: full(p.detach()).cpu().clone() for name, p in self.core.named_parameters()}


@contextmanager
def metrics_log(path: Path, keep_through: int) -> Iterator[Any]:
    """The per-step JSONL, cut back to the steps up to `keep_through` (a resumed run rewrites the
    steps after its checkpoint), opened for appending."""
    lines = path.read_text().splitlines() if path.exists() else []
    kept = [line for line in lines if line.strip() and json.loads(line)["step"] <= keep_through]
    write_text_atomic(path, "".join(line + "\n" for line in kept))
    with open(path, "a") as handle:
        yield handle
