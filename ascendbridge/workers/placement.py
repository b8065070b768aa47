"""What each stage needs, and which devices or cores one job gets.

Preparation stages (the untimed ones: discovery, adaptation, healing) need a CPU. Timed stages (a
stage.toml's `[placement] timed = true`) need devices exclusively: two timed runs on one card, or
on one set of cores, measure each other rather than the model.

A job's placement reaches it through its environment:
- CUDA: CUDA_VISIBLE_DEVICES=<its cards>, so its cuda:0 is its own card.
- Ascend: ASCEND_RT_VISIBLE_DEVICES=<its cards>, so its npu:0 is its own card, except for the
  stages whose run includes the profiled run (`profiling = true`: benchmark and optimization
  profile in the same process that times). CANN's environment variable
  reference (8.3.RC1, envref_07_0028) says the mask is not supported while profiling, so those
  jobs get no mask and ASCENDBRIDGE_NPU_INDEX=<the
  physical index>; the device layer (ab_runtime/device.py) then calls torch.npu.set_device(index).
  Exclusivity does not depend on the mask: the pool never hands one card to two timed jobs.
- CPU-only host: cores are split once, at start, into timed slots (`timed_cores` cores each) and
  the rest for preparation; a timed job is pinned to its slot's cores, every other job to the
  preparation cores (ASCENDBRIDGE_CPU_AFFINITY, applied by the worker with os.sched_setaffinity,
  inherited by everything it starts), so no other work lands on a timed run's cores.
  Once preparation has nothing left to do, its cores are lent as one more timed slot (`lend`):
  on 2 cores the second core otherwise idles through every model's timed stages. While they are
  lent no preparation job starts (it waits for the timed job to end), so the lent cores stay as
  exclusive as any slot's; the scheduler lends them only when no preparation task is ready.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ascendbridge.stage_table import stage_table
from ascendbridge.workers.devices import HostInventory, parse_index_list

# From the stage table (each stage's stage.toml, [placement]).
TIMED_STAGES = frozenset(row.name for row in stage_table() if row.placement.timed)
PROFILING_STAGES = frozenset(
    row.name for row in stage_table() if row.placement.profiling
)  # run includes the profiled run
TENSOR_PARALLEL_STAGES = frozenset(  # claim the plan's tensor-parallel degree of devices
    row.name for row in stage_table() if row.placement.claim == "tensor_parallel"
)
WORLD_SIZE_STAGES = frozenset(  # claim the training job's world size (torchrun processes) of devices
    row.name for row in stage_table() if row.placement.claim == "world_size"
)
CPU_AFFINITY_ENV = "ASCENDBRIDGE_CPU_AFFINITY"
NPU_INDEX_ENV = "ASCENDBRIDGE_NPU_INDEX"
VISIBLE_ENV = {"npu": "ASCEND_RT_VISIBLE_DEVICES", "cuda": "CUDA_VISIBLE_DEVICES"}
RESOURCE_NAME = {"npu": "NPU", "cuda": "GPU", "cpu": "CPU"}  # Ray's resource names


def claimed_cards(env: Mapping[str, str], accelerator: str) -> int | None:
    """The cards the team lead claimed for this task on an `accelerator` host (npu, cuda): its
    placement's visible-device mask; None when it claimed none."""
    raw = env.get(VISIBLE_ENV[accelerator], "").strip()
    return len(parse_index_list(raw, VISIBLE_ENV[accelerator])) if raw else None


def is_timed(stage_name: str) -> bool:
    return stage_name in TIMED_STAGES


def stage_resources(stage_name: str, accelerator: str = "cpu", count: int = 1) -> dict[str, float]:
    """What one task of `stage_name` claims, in Ray's resource names: {"CPU": 1} for preparation;
    {"NPU": count} / {"GPU": count} for a timed stage on an Ascend / CUDA host; on a CPU-only host
    a timed stage claims `count` whole cores ({"CPU": count})."""
    if not is_timed(stage_name):
        return {"CPU": 1.0}
    return {RESOURCE_NAME[accelerator]: float(count)}


def default_timed_cores(total: int) -> int:
    """Cores per timed run on a CPU-only host: a quarter of them (at least one)."""
    return max(1, total // 4)


@dataclass(frozen=True)
class Placement:
    """Where one job runs: the host, its devices (labels like npu:3), its cores, its environment."""

    host: str
    devices: tuple[str, ...] = ()
    cpus: tuple[int, ...] = ()
    env: dict[str, str] = field(default_factory=dict)
    exclusive: bool = False  # a timed job: nothing else runs on these devices / cores
    slots: tuple[int, ...] = ()  # the pool's slots it holds (given back by DevicePool.release)

    def as_dict(self) -> dict[str, object]:
        return {
            "host": self.host,
            "devices": list(self.devices),
            "cpus": list(self.cpus),
            "env": dict(self.env),
            "exclusive": self.exclusive,
        }


class DevicePool:
    """The host's devices for timed jobs, handed out exclusively and taken back when the job ends."""

    def __init__(self, inventory: HostInventory, timed_cores: int | None = None, lend: bool = True) -> None:
        self.inventory = inventory
        self.kind = inventory.kind
        cpus = list(inventory.cpus)
        self.warnings: list[str] = list(inventory.warnings)
        if self.kind != "cpu":
            self.slots: list[tuple[int, ...]] = [(d.index,) for d in inventory.devices]
            self.preparation_cpus: tuple[int, ...] = ()  # not pinned: timed jobs own cards, not cores
        else:
            per = timed_cores or default_timed_cores(len(cpus))
            if per >= len(cpus):
                self.slots = [tuple(cpus)]
                self.preparation_cpus = tuple(cpus)
                self.warnings.append(
                    f"{len(cpus)} core(s) for {per} per timed run: timed runs share their "
                    "cores with preparation (give the host more cores or lower --timed-cores)"
                )
            else:
                count = max(1, (len(cpus) - 1) // per)  # at least one core stays for preparation
                timed = cpus[len(cpus) - count * per :]
                self.slots = [tuple(timed[i * per : (i + 1) * per]) for i in range(count)]
                self.preparation_cpus = tuple(cpus[: len(cpus) - count * per])
        self._free = list(range(len(self.slots)))
        # The preparation cores as a timed slot of their own (index len(slots)) while nothing prepares.
        separate = self.kind == "cpu" and self.preparation_cpus and self.preparation_cpus != self.slots[0]
        self.lent_slot: tuple[int, ...] = tuple(self.preparation_cpus) if lend and separate else ()
        self._lent = False
        self._preparing = 0  # preparation jobs running

    def lendable(self) -> int:
        """1 when the preparation cores could be lent to a timed job now (none preparing, not lent)."""
        return int(bool(self.lent_slot) and not self._lent and not self._preparing)

    def preparation_free(self) -> bool:
        """Whether a preparation job may start now (its cores are not lent to a timed job)."""
        return not self._lent

    @property
    def capacity(self) -> int:
        """Timed slots on this host: cards on an accelerator host, core groups on a CPU-only one."""
        return len(self.slots)

    def free(self) -> int:
        return len(self._free)

    def describe(self) -> str:
        if self.kind != "cpu":
            return f"{self.capacity} {self.kind.upper()} slot(s) for timed stages, one card each"
        prep = ",".join(map(str, self.preparation_cpus))
        slots = "; ".join(",".join(map(str, s)) for s in self.slots)
        lent = " (lent as a timed slot while nothing prepares)" if self.lent_slot else ""
        return f"{self.capacity} timed slot(s) on cores [{slots}]; preparation on cores [{prep}]{lent}"

    def acquire(self, stage: str, count: int = 1, lend: bool = False) -> Placement | None:
        """A placement for one job of `stage`; None when a timed stage finds fewer than `count` free
        slots (a model sharded over N devices claims N at once), or when preparation finds its cores
        lent. With `lend`, a one-slot timed job may take the lendable preparation cores when no
        slot of its own is free."""
        host = self.inventory.host
        if not is_timed(stage):
            if self._lent:
                return None
            self._preparing += 1
            cpus = self.preparation_cpus
            return Placement(host, (), cpus, {CPU_AFFINITY_ENV: _cpu_list(cpus)} if cpus else {})
        if count > len(self._free):
            if not (lend and count == 1 and self.lendable()):
                return None
            self._lent, cpus = True, self.lent_slot
            return Placement(
                host, (f"cpu:{_cpu_list(cpus)}",), cpus, {CPU_AFFINITY_ENV: _cpu_list(cpus)}, True, (len(self.slots),)
            )
        taken, self._free = sorted(self._free)[:count], sorted(self._free)[count:]
        if self.kind == "cpu":
            cpus = tuple(c for i in taken for c in self.slots[i])
            return Placement(
                host, (f"cpu:{_cpu_list(cpus)}",), cpus, {CPU_AFFINITY_ENV: _cpu_list(cpus)}, True, tuple(taken)
            )
        indices = tuple(self.slots[i][0] for i in taken)
        labels = tuple(f"{self.kind}:{i}" for i in indices)
        env = {VISIBLE_ENV[self.kind]: ",".join(map(str, indices))}
        if self.kind == "npu" and stage in PROFILING_STAGES:
            env = {NPU_INDEX_ENV: ",".join(map(str, indices))}
        return Placement(host, labels, (), env, True, tuple(taken))

    def release(self, placement: Placement) -> None:
        """Give a timed job's slots (or the lent preparation cores) back; a preparation job's end
        is counted (the preparation cores become lendable when none runs)."""
        if not placement.exclusive:
            self._preparing = max(0, self._preparing - 1)
        for slot in placement.slots:
            if slot == len(self.slots):
                self._lent = False
            elif slot not in self._free:
                self._free.append(slot)


def _cpu_list(cpus: tuple[int, ...]) -> str:
    return ",".join(map(str, cpus))


def devices_needed(metadata: dict[str, Any] | None, stage: str, world: object = None) -> int:
    """Devices one job of a timed `stage` claims at once for a model: its discovery plan's count
    (1 without a plan), for serving its tensor-parallel degree, for training its job's world size
    `world` (`stage_devices`)."""
    plan = ((metadata or {}).get("decision") or {}).get("plan") or {}
    return stage_devices(stage, plan.get("devices"), plan.get("tensor_parallel_degree"), world)


def stage_devices(stage: str, devices: object, tensor_parallel: object, world: object = None) -> int:
    """The claim from a plan's figures as stored: a serving engine splits the attention heads over
    a power of two of cards (the plan's tensor-parallel degree, at least its device count: 3 cards
    of weights serve on 4); a training job runs one process per device (its world size, at least
    the plan's count); every other stage holds the plan's device count."""
    count = plan_devices(devices)
    if stage in TENSOR_PARALLEL_STAGES and tensor_parallel is not None:
        return max(count, plan_devices(tensor_parallel))
    if stage in WORLD_SIZE_STAGES and world is not None:
        return max(count, plan_devices(world))
    return count


def plan_devices(count: object) -> int:
    """A plan's device count as stored (anything), as a count of at least 1."""
    try:
        return max(1, int(count or 1))  # type: ignore[call-overload]  # whatever the metadata holds: bad -> 1
    except (TypeError, ValueError):
        return 1


def pool_entry(pool: DevicePool) -> dict[str, Any]:
    """One host of the `devices.device_pool` setting: its kind, its timed slots and each device's memory."""
    memory = [d.memory_gb for d in pool.inventory.devices if d.memory_gb is not None]
    return {
        "host": pool.inventory.host,
        "kind": pool.kind,
        "count": pool.capacity,
        "memory_gb": min(memory) if memory and pool.kind != "cpu" else None,
    }


def apply_cpu_affinity() -> tuple[int, ...] | None:
    """Pin this process (and all it starts later) to ASCENDBRIDGE_CPU_AFFINITY's cores, if set."""
    raw = os.environ.get(CPU_AFFINITY_ENV, "").strip()
    if not raw:
        return None
    cpus = parse_index_list(raw, CPU_AFFINITY_ENV)
    os.sched_setaffinity(0, cpus)
    return cpus
