"""What a stage's memory plan is computed from on this host: the room it may fill and the
parameters its run builds (ascendbridge/memory_plan.py is the pure rule; this reads the host).

The host's memory is /proc/meminfo's MemTotal and MemAvailable, or `devices.host_memory_bytes`
(ASCENDBRIDGE_HOST_MEMORY_BYTES) where a person says how much a stage may use (a host shared with
other work, or a test forcing a small host); a card's is `devices.device_memory_gb`, else the
smallest card the device tools report (ascendbridge/workers/devices.py).
"""

from __future__ import annotations

from ab_runtime.memory import FP32_BYTES, GiB, dry_run_budget, meminfo
from ascendbridge.memory_plan import Room
from ascendbridge.settings import DeviceSettings, section
from ascendbridge.workers.devices import probe

OVERRIDE = "ASCENDBRIDGE_HOST_MEMORY_BYTES"


def card_memory(device: str, settings: DeviceSettings) -> int | None:
    """One card's memory in bytes for a target on `device` (npu / cuda); None on a CPU or unknown."""
    if device == "cpu":
        return None
    if settings.device_memory_gb is not None:
        return int(settings.device_memory_gb * GiB)
    found, _source = probe(device)
    sizes = [d.memory_gb for d in found or [] if d.memory_gb]
    return int(min(sizes) * GiB) if sizes else None


def room(device: str) -> Room | None:
    """The room a plan may fill for a run on `device`; None when the host's memory is unknown
    (no /proc/meminfo and no override): the stage then runs unplanned and says so."""
    settings = section(DeviceSettings)
    card = card_memory(device, settings)
    if settings.host_memory_bytes is not None:
        size = settings.host_memory_bytes
        return Room(size, size, settings.memory_fraction, OVERRIDE, card)
    info = meminfo()
    if "MemTotal" not in info or "MemAvailable" not in info:
        return None
    return Room(info["MemAvailable"], info["MemTotal"], settings.memory_fraction, "/proc/meminfo", card)


def built_parameters(parameters: int, pretrained: bool) -> int:
    """The parameters a benchmark-like run builds: all of them with real weights; a dry run reduces
    depth to its float32 budget (ab_runtime/loading.py; at minimal depth it may build more)."""
    if pretrained:
        return parameters
    return min(parameters, dry_run_budget() // FP32_BYTES)
