"""The metrics file of a measured run: its names, its schema and the one reader.

Two writers leave this format: the benchmark's run (`benchmark_metrics_<run>.json`,
ab_runtime/bench/benchmark_run.py) and the optimization's perf run of the chosen passes
(`perf_metrics_<run>.json`, ab_runtime/optimize/perf_run.py). Every reader reads it through
`read_metrics` here: the benchmark and optimization gates, the benchmark aggregate, the dashboard
and the export's `check_package.py` (which imports the copy inside the exported package). Standard
library only, so the framework (no torch) imports this file and a malformed file is refused the same
way everywhere, with one line that names the file and the field.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .spec import proxy_label

METRICS_SCHEMA = "ascendbridge.benchmark_metrics/1"
# The benchmark's run and the optimization's perf run: the prefix of each file, of the metrics file.
PREFIXES = {"benchmark": ("", "benchmark_metrics_"), "perf": ("perf_", "perf_metrics_")}
_PART_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9.-]*(_[A-Za-z0-9.-]+)*$")


class EvidenceError(ValueError):
    """Evidence that is missing, unreadable or not what a measured run writes."""


def evidence_names(kind: str, device: str, dtype: str, mode: str, dataset: str) -> dict[str, str]:
    """The run's three files: `{outputs,trace,metrics}` -> `<prefix><file>_<device>_<dtype>_<mode>_<dataset>.<ext>`;
    each part must be path-safe, so a name never leaves the adaptation directory."""
    if kind not in PREFIXES:
        raise EvidenceError(f"unknown run kind '{kind}' (one of {', '.join(PREFIXES)})")
    for part in (device, dtype, mode, dataset):
        if not _PART_RE.match(part):
            raise EvidenceError(f"'{part}' is not a valid evidence name part (letters, digits, . - _)")
    stem, (prefix, metrics) = f"{device}_{dtype}_{mode}_{dataset}", PREFIXES[kind]
    return {
        "outputs": f"{prefix}outputs_{stem}.pt",
        "trace": f"{prefix}trace_{stem}.json",
        "metrics": f"{metrics}{stem}.json",
    }


def metrics_glob(kind: str) -> str:
    """The glob of `kind`'s metrics files in an adaptation directory."""
    return f"{PREFIXES[kind][1]}*.json"


@dataclass(frozen=True)
class RunKey:
    """What a run measured: the device kind, the dtype, the mode (dry_run / pretrained) and the dataset."""

    device: str
    dtype: str
    mode: str
    dataset: str
    device_name: str | None

    @property
    def label(self) -> str:
        return f"{self.device}/{self.dtype}/{self.mode}/{self.dataset}"


@dataclass(frozen=True)
class MetricsFile:
    """One metrics file: the figures every summary shows, typed, and the whole file (`data`), from
    whose raw samples the gates re-derive every figure."""

    path: Path
    data: dict[str, Any]
    run: RunKey
    median_ms: float
    p90_ms: float
    min_ms: float
    reference_median_ms: float
    samples_per_s: float
    verdict: str
    outputs: dict[str, dict[str, Any]]  # accuracy.outputs: per output, its kind, metrics and verdict

    @property
    def label(self) -> str:
        return self.run.label

    @property
    def proxy(self) -> str | None:
        """`proxy: N of M layers` when the run built a registered reduced-depth proxy (`model.proxy`), else None."""
        proxy = (self.data.get("model") or {}).get("proxy")
        if not isinstance(proxy, dict) or not isinstance(layers := proxy.get("layers"), int):
            return None
        of = proxy.get("of")
        return proxy_label(layers, of if isinstance(of, int) else None)

    def named(self, key: str) -> Path | None:
        """The evidence file the metrics name under `evidence.<key>`, beside it; None unless a plain name."""
        name = (self.data.get("evidence") or {}).get(key)
        if not isinstance(name, str) or "/" in name or "\\" in name or name.startswith("."):
            return None
        return self.path.parent / name


def _field(data: dict[str, Any], dotted: str, kind: type, name: str) -> Any:
    value: Any = data
    for key in dotted.split("."):
        value = value.get(key) if isinstance(value, dict) else None
    number = kind is float and isinstance(value, (int, float)) and not isinstance(value, bool)
    if not (number or (kind is not float and isinstance(value, kind))):
        raise EvidenceError(f"{name}: {dotted} is missing or not a {kind.__name__}; re-run the stage that writes it")
    return float(value) if number else value


def parse_metrics(data: Any, path: Path) -> MetricsFile:
    """`data` (a metrics file's parsed JSON) as a `MetricsFile`; EvidenceError naming the first bad field."""
    name = Path(path).name
    if not isinstance(data, dict) or data.get("schema") != METRICS_SCHEMA:
        raise EvidenceError(f"{name}: not a metrics file (schema != {METRICS_SCHEMA})")
    device_name = data["run"].get("device_name") if isinstance(data.get("run"), dict) else None
    run = RunKey(
        device=_field(data, "run.device", str, name),
        dtype=_field(data, "run.dtype", str, name),
        mode=_field(data, "run.mode", str, name),
        dataset=_field(data, "run.dataset", str, name),
        device_name=device_name if isinstance(device_name, str) else None,
    )
    return MetricsFile(
        path=Path(path),
        data=data,
        run=run,
        median_ms=_field(data, "timing.median_ms", float, name),
        p90_ms=_field(data, "timing.p90_ms", float, name),
        min_ms=_field(data, "timing.min_ms", float, name),
        reference_median_ms=_field(data, "reference_timing.median_ms", float, name),
        samples_per_s=_field(data, "throughput.samples_per_s", float, name),
        verdict=_field(data, "accuracy.verdict", str, name),
        outputs=_field(data, "accuracy.outputs", dict, name),
    )


def load_json(path: Path, error: type[ValueError] = EvidenceError, missing: str = "file not found") -> Any:
    """The parsed JSON of an evidence file; `error` with one line naming the file when it is not there
    (`missing` says what then) or not JSON. The evidence readers (metrics, notes, traces) share it."""
    path = Path(path)
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        raise error(f"{path.name}: {missing}") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise error(f"{path.name}: not valid JSON ({exc.__class__.__name__})") from None


def read_metrics(path: Path) -> MetricsFile:
    """The metrics file at `path`, read and checked; EvidenceError with one line otherwise."""
    return parse_metrics(load_json(path), path)


def find_metrics(directory: Path, kind: str = "benchmark") -> list[MetricsFile]:
    """Every `kind` metrics file in an adaptation directory, read, sorted by name; the first bad one raises."""
    return [read_metrics(p) for p in sorted(Path(directory).glob(metrics_glob(kind)))]
