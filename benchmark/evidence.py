"""Evidence file names and discovery (framework side, no torch).

Every benchmark run leaves three files in its adaptation directory, named
`<kind>_<device>_<dtype>_<mode>_<dataset>.<ext>`; the metrics file lists the other two by name,
so discovery never has to parse names that may themselves contain underscores.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ascendbridge.gatekit.evidence import EvidenceError, load_metrics

OUTPUTS_FORMAT = "ascendbridge.outputs/1"
KINDS = {"outputs": "pt", "benchmark_metrics": "json", "trace": "json"}
_PART_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9.-]*(_[A-Za-z0-9.-]+)*$")


def evidence_name(kind: str, device: str, dtype: str, mode: str, dataset: str) -> str:
    """`<kind>_<device>_<dtype>_<mode>_<dataset>.<ext>`; parts are checked to be path-safe."""
    if kind not in KINDS:
        raise EvidenceError(f"unknown evidence kind '{kind}'")
    for part in (device, dtype, mode, dataset):
        if not _PART_RE.match(part):
            raise EvidenceError(f"'{part}' is not a valid evidence name part")
    return f"{kind}_{device}_{dtype}_{mode}_{dataset}.{KINDS[kind]}"


@dataclass(frozen=True)
class EvidenceSet:
    """One run's metrics file and the files it names."""

    metrics_path: Path
    metrics: dict[str, Any]

    @property
    def directory(self) -> Path:
        return self.metrics_path.parent

    def named(self, key: str) -> Path | None:
        name = (self.metrics.get("evidence") or {}).get(key)
        if not isinstance(name, str) or "/" in name or "\\" in name or name.startswith("."):
            return None
        return self.directory / name

    @property
    def run(self) -> dict[str, Any]:
        return self.metrics.get("run") or {}

    @property
    def label(self) -> str:
        """device/dtype/mode/dataset. The optimization's perf runs have files of their own
        (perf_metrics_*), so a benchmark label never names one."""
        r = self.run
        return f"{r.get('device', '?')}/{r.get('dtype', '?')}/{r.get('mode', '?')}/{r.get('dataset', '?')}"


def find_evidence(adaptation_dir: Path) -> list[EvidenceSet]:
    """Every `benchmark_metrics_*.json` in the adaptation, loaded; unreadable ones raise."""
    return [EvidenceSet(p, load_metrics(p)) for p in sorted(Path(adaptation_dir).glob("benchmark_metrics_*.json"))]
