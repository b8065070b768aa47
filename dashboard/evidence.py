"""Stage evidence read from disk: benchmark metrics, optimization notes, traces, logs, zips.

The metrics files (benchmark_metrics_*.json, perf_metrics_*.json) are read through their one
reader, `ab_runtime/metrics_file.py`: a file it refuses is shown as unreadable. The other formats
(optimization_notes.json: `passes`, `combination`, `final`) are read tolerantly: what this reader
recognises is shown, the rest skipped, and "no evidence yet" said for what does not exist. Every path it opens is resolved and
checked to lie inside its root (the adaptations or the logs directory): a board row pointing at
/etc/passwd, or a symlink planted in an adaptation, shows nothing.
"""

from __future__ import annotations

import os
import re
import tempfile
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, TypeGuard

from ab_runtime import metrics_file
from ascendbridge import capped_read
from ascendbridge.workers.heartbeat import heartbeat_path, progress_text

MAX_JSON_BYTES = 4 * 1024 * 1024
LOG_TAIL_BYTES = 8 * 1024
MAX_ZIP_INPUT_BYTES = 2 * 1024**3
ZIP_SKIP_DIRS = frozenset({".venv", "__pycache__", ".pytest_cache", ".git", ".mypy_cache"})
TRACE_NAME = re.compile(r"^trace_[A-Za-z0-9._-]+\.json$")
# The benchmark's runs, then the optimization's perf runs of the chosen passes (labelled `<run>_perf`).
_METRICS_NAME = re.compile(r"^(?P<kind>benchmark|perf)_metrics_(?P<label>[A-Za-z0-9._-]+)\.json$")

Scalar = str | int | float | bool | None


class EvidenceError(Exception):
    """A requested evidence file that does not exist or may not be served."""


def inside(path: Path, root: Path) -> Path | None:
    """The resolved path if it lies inside root (symlinks followed), else None."""
    try:
        resolved = path.resolve()
        return resolved if resolved.is_relative_to(root.resolve()) else None
    except (OSError, RuntimeError):
        return None


def adaptation_dir(adaptations_root: Path, adaptation_name: str) -> Path | None:
    found = inside(adaptations_root / adaptation_name, adaptations_root)
    return found if found is not None and found.is_dir() else None


def _scalar(value: Any) -> bool:
    return value is None or isinstance(value, (str, int, float, bool))


def flatten(data: dict[str, Any], prefix: str = "", depth: int = 1) -> dict[str, Scalar]:
    """Scalars of a dict, nested dicts folded into dotted keys up to `depth` levels."""
    out: dict[str, Scalar] = {}
    for key, value in data.items():
        name = f"{prefix}{key}"
        if _scalar(value):
            out[name] = value
        elif isinstance(value, dict) and depth > 0:
            out.update(flatten(value, f"{name}.", depth - 1))
        elif isinstance(value, list) and all(_scalar(v) for v in value):
            out[name] = ", ".join(str(v) for v in value)
    return out


def _load_json(path: Path) -> dict[str, Any] | None:
    return capped_read.json_object(path, MAX_JSON_BYTES)


@dataclass
class OutputAccuracy:
    """One compared output tensor: its verdict and measured figures first, thresholds apart."""

    name: str
    verdict: str
    kind: str
    measured: dict[str, Scalar]
    thresholds: dict[str, Scalar]
    reasons: list[str]


# Measured figures in the order a reader wants them; the others follow in file order.
MEASURED_FIRST = (
    "cosine",
    "max_abs_err_scaled",
    "max_abs_err",
    "max_rel_err",
    "rmse_vs_fp64",
    "baseline_rmse_vs_fp64",
    "label_match",
)


def _number(value: Any) -> TypeGuard[int | float]:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def output_accuracy(accuracy: Any) -> list[OutputAccuracy]:
    """Per output of a metrics file's `accuracy.outputs` (ascendbridge.benchmark_metrics/1)."""
    outputs = accuracy.get("outputs") if isinstance(accuracy, dict) else None
    if not isinstance(outputs, dict):
        return []
    rows = []
    for name, item in outputs.items():
        if not isinstance(item, dict):
            continue
        metrics = got if isinstance(got := item.get("metrics"), dict) else {}
        measured = {k: v for k, v in metrics.items() if _scalar(v)}
        ordered = {k: measured[k] for k in MEASURED_FIRST if k in measured}
        ordered.update({k: v for k, v in measured.items() if k not in ordered})
        applied = got if isinstance(got := item.get("applied"), dict) else {}
        rows.append(
            OutputAccuracy(
                name=str(item.get("name") or name),
                verdict=str(item.get("verdict") or "?"),
                kind=str(item.get("kind") or ""),
                measured=ordered,
                thresholds={k: v for k, v in applied.items() if _scalar(v)},
                reasons=[str(r) for r in item.get("reasons") or [] if _scalar(r)],
            )
        )
    return rows


@dataclass
class BenchmarkRun:
    """One benchmark_metrics_<device>_<dtype>_<mode>_<dataset>.json file."""

    file: str
    label: str
    latency: dict[str, float]  # the target run's `timing`: median_ms, p90_ms, min_ms, mean_ms, ...
    reference_latency: dict[str, float]  # the CPU float32 reference's `reference_timing`
    verdict: str | None
    outputs: list[OutputAccuracy]
    figures: dict[str, Scalar]
    readable: bool = True
    # The workload's headline (TTFT / TPOT / tokens/s / decode bandwidth, or sweep throughput and
    # knee) and, for a batch sweep, (batch, samples/s) per point for the sweep chart.
    workload: dict[str, Scalar] = field(default_factory=dict)
    sweep: list[tuple[int, float]] = field(default_factory=list)

    @property
    def measured_columns(self) -> list[str]:
        """Union of the outputs' measured figure names, in reading order (for one table)."""
        columns: list[str] = []
        for out in self.outputs:
            columns += [k for k in out.measured if k not in columns]
        return columns


def _timing(block: Any) -> dict[str, float]:
    """The scalar figures of a timing block (the raw samples stay in the file)."""
    if not isinstance(block, dict):
        return {}
    return {k: float(v) for k, v in block.items() if _number(v)}


def workload_summary(body: Any) -> tuple[dict[str, Scalar], list[tuple[int, float]]]:
    """(headline figures, sweep points) of a metrics file's `workload` block; empty when absent."""
    if not isinstance(body, dict) or not isinstance(body.get("headline"), dict):
        return {}, []
    head: dict[str, Scalar] = {k: v for k, v in body["headline"].items() if _scalar(v)}
    head["name"] = str((body.get("workload") or {}).get("name", ""))
    agree = body.get("greedy_vs_reference")
    if isinstance(agree, dict):
        head["greedy_match_rate"] = agree.get("match_rate") if _number(agree.get("match_rate")) else None
        head["first_divergence"] = agree.get("first_divergence") if _number(agree.get("first_divergence")) else None
    if _number(body.get("knee_batch")):
        head["knee_batch"] = body["knee_batch"]
    points = [
        (int(p["batch"]), float(p["samples_per_s"]))
        for p in body.get("points") or []
        if isinstance(p, dict) and _number(p.get("batch")) and _number(p.get("samples_per_s"))
    ]
    return head, points


def benchmark_runs(adapt_dir: Path | None) -> list[BenchmarkRun]:
    if adapt_dir is None:
        return []
    runs = []
    paths = [path for kind in metrics_file.PREFIXES for path in sorted(adapt_dir.glob(metrics_file.metrics_glob(kind)))]
    for path in paths:
        match = _METRICS_NAME.match(path.name)
        if not match or inside(path, adapt_dir) is None:
            continue
        label = match["label"] + ("_perf" if match["kind"] == "perf" else "")
        try:  # the format's one reader (ab_runtime/metrics_file.py), on a size-capped read
            metrics = metrics_file.parse_metrics(_load_json(path), path)
        except metrics_file.EvidenceError:
            runs.append(BenchmarkRun(path.name, label, {}, {}, None, [], {}, readable=False))
            continue
        data = metrics.data
        rest = {k: v for k, v in data.items() if k not in ("accuracy", "timing", "reference_timing", "workload")}
        workload, sweep = workload_summary(data.get("workload"))
        runs.append(
            BenchmarkRun(
                file=path.name,
                label=label,
                latency=_timing(data.get("timing")),
                reference_latency=_timing(data.get("reference_timing")),
                verdict=metrics.verdict,
                outputs=output_accuracy(data["accuracy"]),
                figures=flatten(rest),
                workload=workload,
                sweep=sweep,
            )
        )
    return runs


@dataclass
class PassRow:
    """One optimization pass (or combination step) as a person reads it."""

    name: str  # "cpu_bf16_cast", or "a + b" for a combination
    tried: str  # "measured", "not measured"
    speedup: float | None
    interval: tuple[float, float] | None
    accuracy: str | None
    kept: bool
    reason: str


@dataclass
class OptimizationNotes:
    passes: list[PassRow] = field(default_factory=list)
    final: dict[str, Scalar] = field(default_factory=dict)  # chosen passes, speedup, interval, outcome
    baseline: dict[str, Scalar] = field(default_factory=dict)
    readable: bool = True

    def speedups(self) -> list[tuple[str, float]]:
        """(pass, measured speedup) for every measured pass, for the speedup chart."""
        return [(p.name, p.speedup) for p in self.passes if p.speedup is not None]


def _interval(value: Any) -> tuple[float, float] | None:
    if isinstance(value, (list, tuple)) and len(value) == 2 and all(_number(v) for v in value):
        return float(value[0]), float(value[1])
    return None


def _pass_row(item: dict[str, Any]) -> PassRow:
    paired = got if isinstance(got := item.get("paired"), dict) else {}
    accuracy = got if isinstance(got := item.get("accuracy"), dict) else {}
    names = got if isinstance(got := item.get("passes"), list) else []
    name = str(item.get("name") or " + ".join(str(n) for n in names) or "?")
    speedup = paired.get("speedup")
    return PassRow(
        name=name,
        tried="measured" if item.get("measured") else "not measured",
        speedup=float(speedup) if _number(speedup) else None,
        interval=_interval(paired.get("interval")),
        accuracy=str(accuracy["verdict"]) if accuracy.get("verdict") is not None else None,
        kept=item.get("kept") is True,
        reason=str(item.get("reason") or ""),
    )


def optimization_notes(adapt_dir: Path | None) -> OptimizationNotes | None:
    """optimization_notes.json: its passes, combination steps, the final choice and the baseline."""
    if adapt_dir is None:
        return None
    path = adapt_dir / "optimization_notes.json"
    if not path.is_file() or inside(path, adapt_dir) is None:
        return None
    data = _load_json(path)
    if data is None:
        return OptimizationNotes(readable=False)
    lists = [listed for key in ("passes", "combination") if isinstance(listed := data.get(key), list)]
    rows = [_pass_row(item) for items in lists for item in items if isinstance(item, dict)]
    final = got if isinstance(got := data.get("final"), dict) else {}
    baseline = got if isinstance(got := data.get("baseline"), dict) else {}
    summary = flatten({k: v for k, v in final.items() if k not in ("cold_start", "accuracy")}, depth=0)
    if isinstance(final.get("accuracy"), dict) and final["accuracy"].get("verdict") is not None:
        summary["accuracy"] = final["accuracy"]["verdict"]
    return OptimizationNotes(
        passes=rows, final=summary, baseline=flatten({k: v for k, v in baseline.items() if k != "cold_start"}, depth=0)
    )


def traces(adapt_dir: Path | None) -> list[tuple[str, int]]:
    """(file name, size) of the Chrome traces an adaptation holds."""
    if adapt_dir is None:
        return []
    out = []
    for path in sorted(adapt_dir.glob("trace_*.json")):
        if TRACE_NAME.match(path.name) and inside(path, adapt_dir) is not None and path.is_file():
            out.append((path.name, path.stat().st_size))
    return out


def trace_file(adapt_dir: Path | None, name: str) -> Path:
    if adapt_dir is None:
        raise EvidenceError("this model has no adaptation directory yet")
    if not TRACE_NAME.match(name):
        raise EvidenceError(f"'{name}' is not a trace file name (trace_<...>.json)")
    found = inside(adapt_dir / name, adapt_dir)
    if found is None or not found.is_file():
        raise EvidenceError(f"no trace '{name}' in this adaptation")
    return found


@dataclass(frozen=True)
class LogTail:
    text: str | None
    note: str = ""
    truncated: bool = False


def _log_file(log_path: str, logs_root: Path) -> Path | None:
    """An attempt's recorded log path, resolved, only if it lies inside the logs directory."""
    path = Path(log_path)
    return inside(path if path.is_absolute() else logs_root / path, logs_root)


def running_progress(log_path: str | None, logs_root: Path) -> str | None:
    """A running attempt's last progress line and its age, from the heartbeat beside its log
    (ascendbridge/workers/heartbeat.py); None for a log outside the logs directory."""
    found = _log_file(log_path, logs_root) if log_path else None
    if found is None or inside(heartbeat_path(found), logs_root) is None:
        return None
    return progress_text(found)


def log_tail(log_path: str | None, logs_root: Path, max_bytes: int = LOG_TAIL_BYTES) -> LogTail:
    """The end of an attempt's log, only if the file lies inside the logs directory."""
    if not log_path:
        return LogTail(None, "no log recorded")
    found = _log_file(log_path, logs_root)
    if found is None:
        return LogTail(None, "log is outside the logs directory; not shown")
    if not found.is_file():
        return LogTail(None, "log file no longer exists")
    try:
        with found.open("rb") as fh:
            size = fh.seek(0, os.SEEK_END)
            fh.seek(max(0, size - max_bytes))
            raw = fh.read(max_bytes)
    except OSError as exc:
        return LogTail(None, f"log unreadable: {exc.strerror}")
    return LogTail(raw.decode("utf-8", errors="replace"), truncated=size > max_bytes)


def zip_adaptation(adapt_dir: Path) -> IO[bytes]:
    """The adaptation as a zip in a temporary file: environments, caches and symlinks left out."""
    total = 0
    spool = tempfile.SpooledTemporaryFile(max_size=32 * 1024 * 1024)
    with zipfile.ZipFile(spool, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for root, dirs, files in os.walk(adapt_dir, followlinks=False):
            dirs[:] = sorted(d for d in dirs if d not in ZIP_SKIP_DIRS and not Path(root, d).is_symlink())
            for name in sorted(files):
                path = Path(root, name)
                if path.is_symlink() or not path.is_file():
                    continue
                total += path.stat().st_size
                if total > MAX_ZIP_INPUT_BYTES:
                    raise EvidenceError("adaptation is larger than 2 GiB; copy it from disk instead")
                archive.write(path, Path(adapt_dir.name, path.relative_to(adapt_dir)).as_posix())
    spool.seek(0)
    return spool
