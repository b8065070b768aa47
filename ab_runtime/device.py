"""The one device layer: npu (torch_npu) -> cuda -> cpu, and nothing silent.

All NPU-specific calls live here, written against torch_npu's documented API: importing
torch_npu registers `torch.npu` (is_available, device_count, set_device, get_device_name,
synchronize, max_memory_allocated, reset_peak_memory_stats, empty_cache). An explicitly
requested device that is unavailable is an error; a fallback happens only when the caller allows
it, and is then marked with its reason, because a CPU run reported as an NPU run is the classic
false pass of NPU validation.

Under torchrun every rank makes its own card current (the LOCAL_RANK-th of the cards the team lead
claimed, `rank_device`) before it joins the process group (HCCL / NCCL / gloo), the order of
torch_npu's documented examples (Ascend Extension for PyTorch API reference, "Distributed":
`torch.npu.set_device("npu:" + str(rank))`, then `dist.init_process_group("hccl", ...)`).
"""

from __future__ import annotations

import os
import platform
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from typing import Any

import torch

from .errors import DeviceUnavailable

DEVICE_CHOICES = ("auto", "npu", "cuda", "cpu")
# Environment that changes how torch_npu dispatches work; recorded with every result.
NPU_ENV_VARS = ("ASCEND_RT_VISIBLE_DEVICES", "ASCENDBRIDGE_NPU_INDEX", "TASK_QUEUE_ENABLE", "PYTORCH_NPU_ALLOC_CONF")
# The physical card(s) of a job that runs without ASCEND_RT_VISIBLE_DEVICES: CANN does not support
# that mask together with profiling, so the team lead hands profiled (timed) runs their card this way.
NPU_INDEX_ENV = "ASCENDBRIDGE_NPU_INDEX"
VISIBLE_ENV = {"npu": "ASCEND_RT_VISIBLE_DEVICES", "cuda": "CUDA_VISIBLE_DEVICES"}  # the team lead's mask


@dataclass(frozen=True)
class DeviceChoice:
    requested: str
    kind: str  # npu | cuda | cpu
    torch_device: str  # what tensors are moved to, e.g. "npu:0"
    name: str
    fallback: bool
    fallback_reason: str | None
    torch_npu_version: str | None
    skipped: tuple[str, ...] = ()  # why each earlier device in the order was not used

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def torch_npu_version() -> str | None:
    """Version of torch_npu if it imports, else None (never raises)."""
    try:
        import torch_npu  # registers torch.npu
    except Exception:
        return None
    return str(getattr(torch_npu, "__version__", "unknown"))


def _probe_npu() -> tuple[bool, str]:
    """(available, reason if not)."""
    try:
        import torch_npu  # noqa: F401
    except ImportError as exc:
        return False, f"torch_npu is not installed ({exc})"
    except Exception as exc:  # CANN libraries missing or mismatched: import itself fails
        return (
            False,
            f"torch_npu failed to import: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}",
        )
    npu = getattr(torch, "npu", None)
    if npu is None:
        return False, "torch_npu imported but torch.npu is not registered"
    try:
        if not npu.is_available():
            return False, "torch_npu is installed but torch.npu.is_available() is False (no NPU visible)"
        if npu.device_count() < 1:
            return False, "torch.npu.device_count() is 0"
    except Exception as exc:
        return False, f"torch.npu query failed: {type(exc).__name__}: {exc}"
    return True, ""


def torchair_module() -> Any:
    """torchair, imported after torch_npu as its documentation requires (ImportError when absent).

    Used by the decode graph-mode passes: `torchair.CompilerConfig()`, `config.mode`
    ("max-autotune": Ascend IR graph, the default; "reduce-overhead": aclgraph where the installed
    release offers it) and `torchair.get_npu_backend(compiler_config=config)`.
    """
    import torch_npu  # noqa: F401  (must come first)
    import torchair

    return torchair


def _probe_cuda() -> tuple[bool, str]:
    if not torch.cuda.is_available():
        return False, "torch.cuda.is_available() is False"
    return True, ""


def _cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as handle:
            for line in handle:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "cpu"


def _npu_physical(env: Mapping[str, str]) -> tuple[int, ...] | None:
    """ASCENDBRIDGE_NPU_INDEX's physical indices (a job without the mask), None when unset."""
    raw = env.get(NPU_INDEX_ENV, "").strip()
    if not raw:
        return None
    parts = [p.strip() for p in raw.split(",") if p.strip()]
    if not parts or not all(p.isdigit() for p in parts):
        raise DeviceUnavailable(f"{NPU_INDEX_ENV}={raw!r} is not a list of NPU indices")
    return tuple(int(p) for p in parts)


def visible_indices(kind: str, env: Mapping[str, str], device_count: Callable[[], int]) -> tuple[int, ...]:
    """The cards a job may use, in torch's numbering: on an NPU without a mask ASCENDBRIDGE_NPU_INDEX's
    physical indices; otherwise 0..device_count()-1, the cards of ASCEND_RT_VISIBLE_DEVICES /
    CUDA_VISIBLE_DEVICES (the team lead's claim). () on CPU."""
    if kind == "cpu":
        return ()
    physical = _npu_physical(env) if kind == "npu" else None
    return physical if physical is not None else tuple(range(device_count()))


def _env_int(env: Mapping[str, str], name: str, default: int) -> int:
    raw = env.get(name, "").strip()
    if not raw:
        return default
    if not raw.isdigit():
        raise DeviceUnavailable(f"{name}={raw!r} is not a process index or count")
    return int(raw)


@dataclass(frozen=True)
class RankDevice:
    """One torchrun rank's device and process-group backend."""

    torch_device: str  # npu:N | cuda:N | cpu
    index: int | None  # torch's index of the rank's card (what set_device takes); None on CPU
    backend: str  # hccl | nccl | gloo


DIST_BACKENDS = {"npu": "hccl", "cuda": "nccl", "cpu": "gloo"}


def rank_device(kind: str, visible: tuple[int, ...], env: Mapping[str, str]) -> RankDevice:
    """The device of this process: under torchrun (LOCAL_RANK, LOCAL_WORLD_SIZE) the LOCAL_RANK-th card
    of `visible`, so each rank owns one card of the claim; alone, the first. The claim must hold a card
    for every local rank: fewer is refused with the numbers, never two ranks on one card."""
    if kind == "cpu":
        return RankDevice("cpu", None, DIST_BACKENDS["cpu"])
    rank = _env_int(env, "LOCAL_RANK", 0)
    world = _env_int(env, "LOCAL_WORLD_SIZE", _env_int(env, "WORLD_SIZE", 1))
    if rank >= max(world, 1):
        raise DeviceUnavailable(f"LOCAL_RANK {rank} is not below LOCAL_WORLD_SIZE {world}")
    if len(visible) < world:
        mask = NPU_INDEX_ENV if kind == "npu" and env.get(NPU_INDEX_ENV, "").strip() else VISIBLE_ENV[kind]
        raise DeviceUnavailable(
            f"{world} {kind} processes need a card each but this job sees {len(visible)} "
            f"({mask}={env.get(mask, '<unset>')!r}); run it through the team lead (the training stage claims one "
            f"card per process) or make {world} cards visible with {VISIBLE_ENV[kind]}"
        )
    index = visible[rank]
    return RankDevice(f"{kind}:{index}", index, DIST_BACKENDS[kind])


def accelerator_indices(choice: DeviceChoice) -> tuple[int, ...]:
    """The cards this job may use (`visible_indices` of this process's environment); () on CPU."""
    return visible_indices(choice.kind, os.environ, lambda: int(_backend(choice.kind).device_count()))


def _activate(kind: str) -> tuple[str, str]:
    """Make this rank's card of `kind` current (`rank_device`) and return (torch device string, name)."""
    if kind == "cpu":
        return "cpu", _cpu_name()
    backend = _backend(kind)
    rank = rank_device(kind, visible_indices(kind, os.environ, lambda: int(backend.device_count())), os.environ)
    backend.set_device(rank.index)  # torch.cuda.set_device(int); torch_npu: torch.npu.set_device(int | "npu:N")
    return rank.torch_device, str(backend.get_device_name(rank.index))


PROBES = {"npu": _probe_npu, "cuda": _probe_cuda}


def select_device(requested: str = "auto", allow_fallback: bool = False) -> DeviceChoice:
    """Pick the device to run on.

    auto: the first available of npu, cuda, cpu (not a fallback: nothing specific was asked).
    npu/cuda: that device or DeviceUnavailable; with allow_fallback the next available device in
    the npu -> cuda -> cpu order is used and the choice is marked fallback=True with the reason.
    """
    if requested not in DEVICE_CHOICES:
        raise DeviceUnavailable(f"unknown device '{requested}', expected one of {', '.join(DEVICE_CHOICES)}")
    npu_version = torch_npu_version()
    order = ["npu", "cuda", "cpu"]
    reasons: list[str] = []
    if requested == "auto":
        candidates = order
    else:
        candidates = order[order.index(requested) :]
    for kind in candidates:
        probe = PROBES.get(kind)
        available, reason = probe() if probe else (True, "")
        if available:
            fallback = requested not in ("auto", kind)
            torch_device, name = _activate(kind)
            return DeviceChoice(
                requested=requested,
                kind=kind,
                torch_device=torch_device,
                name=name,
                fallback=fallback,
                fallback_reason="; ".join(reasons) if fallback else None,
                torch_npu_version=npu_version,
                skipped=tuple(reasons),
            )
        reasons.append(f"{kind}: {reason}")
        if requested != "auto" and not allow_fallback:
            break
    raise DeviceUnavailable(
        f"device '{requested}' requested but not available ({'; '.join(reasons)}); "
        "pass --allow-fallback to run elsewhere and report it"
    )


def device_env() -> dict[str, str]:
    """The NPU-relevant environment variables that are set (values are not secrets)."""
    return {name: os.environ[name] for name in NPU_ENV_VARS if name in os.environ}


def _backend(kind: str) -> Any:
    return getattr(torch, kind, None) if kind in ("npu", "cuda") else None


def synchronize(choice: DeviceChoice) -> None:
    """Wait for queued device work; a no-op on CPU. Timing without it measures dispatch only."""
    backend = _backend(choice.kind)
    if backend is not None:
        backend.synchronize()


def peak_memory(choice: DeviceChoice) -> int | None:
    """Peak bytes allocated on the device since the last reset; None on CPU (see host_peak_rss)."""
    backend = _backend(choice.kind)
    return int(backend.max_memory_allocated()) if backend is not None else None


def reset_peak_memory(choice: DeviceChoice) -> None:
    backend = _backend(choice.kind)
    if backend is not None:
        backend.reset_peak_memory_stats()


def empty_cache(choice: DeviceChoice) -> None:
    backend = _backend(choice.kind)
    if backend is not None:
        backend.empty_cache()


def host_peak_rss() -> int:
    """Peak resident memory of this process in bytes (Linux reports ru_maxrss in KiB)."""
    import resource

    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024


def device_total_memory(choice: DeviceChoice) -> int | None:
    """Total memory of this process's accelerator (its rank's card) in bytes; None on CPU."""
    backend = _backend(choice.kind)
    if backend is None:
        return None
    return int(backend.get_device_properties(int(choice.torch_device.partition(":")[2] or 0)).total_memory)


def adamw_class(choice: DeviceChoice, sharded: bool) -> tuple[Any, str]:
    """The AdamW the training harness uses and why: torch_npu's fused kernel on an NPU
    (`torch_npu.optim.NpuFusedAdamW`), except under FSDP2 (`sharded`), where torch_npu documents
    it as unsupported (it flattens parameters, FSDP2 shards them as DTensors); torch.optim.AdamW
    everywhere else, and on an NPU whose torch_npu lacks the fused optimizer."""
    if choice.kind == "npu" and not sharded:
        try:
            from torch_npu.optim import NpuFusedAdamW
        except ImportError as exc:
            return torch.optim.AdamW, f"torch.optim.AdamW (torch_npu.optim.NpuFusedAdamW unavailable: {exc})"
        return NpuFusedAdamW, "torch_npu.optim.NpuFusedAdamW (fused kernel on the NPU)"
    if choice.kind == "npu":
        return torch.optim.AdamW, "torch.optim.AdamW (NpuFusedAdamW does not support FSDP2's sharded parameters)"
    return torch.optim.AdamW, f"torch.optim.AdamW ({choice.kind})"
