"""The host's device inventory: which NPUs, CUDA GPUs and CPU cores the team lead may schedule on.

Found at start without torch (the framework environment has none): NPUs from torch_npu when a probe
environment has it (the `--python` interpreter, ASCENDBRIDGE_SYSTEM_PYTHON: torch_npu counts the cards
the runtime will really see), else from `npu-smi info` (Ascend's driver tool, always installed with
the driver), CUDA GPUs from `nvidia-smi`, CPU cores
from the process's own affinity mask (os.sched_getaffinity: a container's or taskset's limits
count, not the machine's core total). An explicit `--devices npu:0-7` / `cuda:0,1` / `cpu[:0-7]`
wins: it is checked against what the tools found, and trusted with a warning when the tool is
missing (a container without the driver tools mounted).
"""

from __future__ import annotations

import json
import os
import re
import socket
from collections.abc import Callable
from dataclasses import asdict, dataclass, field

from ab_runtime.tools import run_tool

KINDS = ("npu", "cuda", "cpu")
# A tool's output, or None when the tool is not installed (injectable for tests and Ray nodes).
Runner = Callable[[list[str]], str | None]


class DeviceSpecError(ValueError):
    """A bad --devices value or one the host cannot satisfy; shown as one line."""


@dataclass(frozen=True)
class Device:
    """One schedulable accelerator (physical index as its tool numbers it) or, on CPU hosts, one core."""

    kind: str  # npu | cuda | cpu
    index: int
    name: str = ""
    memory_gb: float | None = None  # device memory (HBM / VRAM), GiB; None for CPU cores

    @property
    def label(self) -> str:
        return f"{self.kind}:{self.index}"


@dataclass(frozen=True)
class HostInventory:
    """What one host offers: its accelerators of one kind (none on a CPU-only host) and its cores."""

    host: str
    kind: str  # npu | cuda | cpu: the kind timed stages run on
    devices: tuple[Device, ...]  # accelerators; empty when kind == "cpu"
    cpus: tuple[int, ...]  # cores this process may use
    source: str = ""  # how it was found: "torch_npu", "npu-smi", "nvidia-smi", "--devices", "affinity"
    warnings: tuple[str, ...] = field(default_factory=tuple)

    def describe(self) -> str:
        cores = f"{len(self.cpus)} CPU core(s)"
        if self.kind == "cpu":
            return f"{self.host}: CPU only, {cores} ({self.source})"
        mem = {d.memory_gb for d in self.devices}
        per = f" x {mem.pop():g} GiB" if len(mem) == 1 and None not in mem else ""
        labels = ",".join(str(d.index) for d in self.devices)
        return (
            f"{self.host}: {len(self.devices)} {self.kind.upper()}{per} ({self.kind}:{labels}), {cores} ({self.source})"
        )

    def as_rows(self) -> list[dict[str, object]]:
        """One row per device for the board (host_devices); a CPU-only host is one 'cpu' row."""
        if self.kind == "cpu":
            return [
                {
                    "kind": "cpu",
                    "index": 0,
                    "name": f"{len(self.cpus)} cores",
                    "memory_gb": None,
                    "cpus": list(self.cpus),
                }
            ]
        return [{**asdict(d), "cpus": []} for d in self.devices]


def parse_index_list(raw: str, what: str) -> tuple[int, ...]:
    """`0-7`, `0,1,4-5` -> sorted unique indices; DeviceSpecError on anything else."""
    out: set[int] = set()
    for part in filter(None, (p.strip() for p in raw.split(","))):
        m = re.fullmatch(r"(\d+)(?:-(\d+))?", part)
        if not m:
            raise DeviceSpecError(f"{what}: '{part}' is not an index or a range like 0-7")
        lo, hi = int(m.group(1)), int(m.group(2) if m.group(2) is not None else m.group(1))
        if hi < lo:
            raise DeviceSpecError(f"{what}: range '{part}' runs backwards")
        out.update(range(lo, hi + 1))
    if not out:
        raise DeviceSpecError(f"{what}: no index given")
    return tuple(sorted(out))


def parse_spec(spec: str) -> tuple[str, tuple[int, ...] | None]:
    """`npu:0-7` -> ("npu", (0..7)); `cuda:0,1`; `cpu` -> ("cpu", None); `cpu:0-3` -> cores 0..3."""
    kind, sep, rest = spec.strip().lower().partition(":")
    if kind not in KINDS:
        raise DeviceSpecError(f"--devices '{spec}': expected npu:LIST, cuda:LIST or cpu[:LIST] (e.g. npu:0-7)")
    if not sep:
        if kind != "cpu":
            raise DeviceSpecError(f"--devices '{spec}': name the {kind} indices, e.g. {kind}:0-7")
        return kind, None
    return kind, parse_index_list(rest, f"--devices '{spec}'")


_NPU_ROW = re.compile(r"^\|\s*(\d+)\s+(\S+)\s*\|\s*(\S+)\s*\|")  # | 0     910B3    | OK    | ...
_NPU_CHIP = re.compile(r"^\|\s*\d+\s*\|\s*[0-9A-Fa-f]{4}:")  # | 0     | 0000:C1:00.0 | ...
_USAGE = re.compile(r"(\d+)\s*/\s*(\d+)")


def parse_npu_smi(text: str) -> list[Device]:
    """Devices of `npu-smi info`'s first table: a row `| NPU Name | Health | ...` followed by its
    chip row `| Chip | Bus-Id | AICore Memory-Usage(MB) HBM-Usage(MB) |`; memory is the last
    `used / total` pair (HBM on 910 cards). The process table that follows is ignored."""
    devices: list[Device] = []
    pending: tuple[int, str] | None = None
    for line in text.splitlines():
        if "Process id" in line or "Process name" in line:
            break
        row = _NPU_ROW.match(line)
        if row and not _NPU_CHIP.match(line):
            pending = (int(row.group(1)), row.group(2))
            continue
        if pending and _NPU_CHIP.match(line):
            pairs = _USAGE.findall(line)
            memory = round(int(pairs[-1][1]) / 1024, 1) if pairs else None
            devices.append(Device("npu", pending[0], pending[1], memory))
            pending = None
    return devices


def parse_nvidia_smi(text: str) -> list[Device]:
    """`nvidia-smi --query-gpu=index,name,memory.total --format=csv,noheader,nounits` (MiB)."""
    devices = []
    for line in text.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) == 3 and parts[0].isdigit():
            try:
                memory: float | None = round(float(parts[2]) / 1024, 1)
            except ValueError:
                memory = None
            devices.append(Device("cuda", int(parts[0]), parts[1], memory))
    return devices


PROBES: dict[str, tuple[list[str], Callable[[str], list[Device]]]] = {
    "npu": (["npu-smi", "info"], parse_npu_smi),
    "cuda": (["nvidia-smi", "--query-gpu=index,name,memory.total", "--format=csv,noheader,nounits"], parse_nvidia_smi),
}


# Run by the probe environment's interpreter. Ascend Extension for PyTorch's device API (torch_npu.npu,
# "NPU Device" in its API list, e.g. release 6.0.0 for CANN 8.0): device_count(), get_device_name(i),
# get_device_properties(i).total_memory (bytes). Indices are the runtime's logical ones.
TORCH_NPU_PROBE = """
import json
import torch_npu
npu = torch_npu.npu
print(json.dumps([{"index": i, "name": str(npu.get_device_name(i)),
                   "memory": int(getattr(npu.get_device_properties(i), "total_memory", 0) or 0)}
                  for i in range(int(npu.device_count()))]))
"""


def parse_torch_npu(text: str) -> list[Device]:
    """TORCH_NPU_PROBE's JSON line -> devices (memory in GiB; 0 bytes: unknown)."""
    lines = text.strip().splitlines()
    try:
        rows = json.loads(lines[-1]) if lines else []
        return [
            Device("npu", int(r["index"]), str(r["name"]), round(int(r["memory"]) / 1024**3, 1) or None) for r in rows
        ]
    except (ValueError, TypeError, KeyError):
        return []


def probe_python() -> str | None:
    """The probe environment: the system-mode interpreter (--python) when one is configured."""
    from ascendbridge.settings import EnvsSettings, section

    return (section(EnvsSettings).system_python or "").strip() or None


def probe(kind: str, runner: Runner = run_tool, python: str | None = None) -> tuple[list[Device] | None, str]:
    """(devices of `kind`, the source that reported them); devices None when no source answered.
    NPUs: torch_npu in the probe environment `python` first (it fails without torch_npu or cards),
    then npu-smi."""
    if kind == "npu" and python:
        out = runner([python, "-c", TORCH_NPU_PROBE])
        found = parse_torch_npu(out) if out is not None else []
        if found:
            return found, "torch_npu"
    argv, parse = PROBES[kind]
    out = runner(argv)
    return (None if out is None else parse(out)), argv[0]


def host_cpus() -> tuple[int, ...]:
    return tuple(sorted(os.sched_getaffinity(0)))


def detect(
    spec: str | None = None,
    runner: Runner = run_tool,
    cpus: tuple[int, ...] | None = None,
    host: str | None = None,
    python: str | None = None,
) -> HostInventory:
    """The inventory: the explicit spec when given (checked), else NPUs, else GPUs, else CPU only.
    `python`: the probe environment for torch_npu (default: probe_python())."""
    host = host or socket.gethostname()
    cpus = host_cpus() if cpus is None else cpus
    python = python or probe_python()
    if not spec:
        for kind in ("npu", "cuda"):
            found, source = probe(kind, runner, python)
            if found:
                return HostInventory(host, kind, tuple(found), cpus, source)
        return HostInventory(host, "cpu", (), cpus, "affinity")
    kind, indices = parse_spec(spec)
    if kind == "cpu":
        if indices is None:
            return HostInventory(host, "cpu", (), cpus, "--devices")
        missing = sorted(set(indices) - set(cpus))
        if missing:
            raise DeviceSpecError(
                f"--devices '{spec}': core(s) {','.join(map(str, missing))} not available to this "
                f"process (allowed: {','.join(map(str, cpus))})"
            )
        return HostInventory(host, "cpu", (), tuple(indices), "--devices")
    assert indices is not None
    found, tool = probe(kind, runner, python)
    if found is None:
        warning = f"{tool} not found: trusting --devices {spec} without checking it"
        return HostInventory(host, kind, tuple(Device(kind, i) for i in indices), cpus, "--devices", (warning,))
    by_index = {d.index: d for d in found}
    missing = [i for i in indices if i not in by_index]
    if missing:
        have = ",".join(str(i) for i in sorted(by_index)) or "none"
        raise DeviceSpecError(
            f"--devices '{spec}': {kind}:{','.join(map(str, missing))} not found by {tool} (it reports {kind}: {have})"
        )
    return HostInventory(host, kind, tuple(by_index[i] for i in indices), cpus, "--devices")
