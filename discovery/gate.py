"""The discovery gate: re-derive what the run claimed, by code that does not share its parser.

It re-resolves the model's source from the board record, re-parses config.json, re-counts the
parameters from the safetensors headers with its own minimal reader (or the Hub's server-side
count), re-measures the weights on disk, and re-applies the decision rules. Any difference fails
the gate with the check that differed.
"""

from __future__ import annotations

import json
import math
import re
import struct
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import dataclasses as pydantic_dataclasses

from ascendbridge import capped_read
from ascendbridge.board.reader import ReadOnlyBoard
from ascendbridge.discovery.config_estimate import estimate_parameters
from ascendbridge.discovery.decisions import decide
from ascendbridge.discovery.errors import DiscoveryError
from ascendbridge.discovery.hub import cache_dir, cached_snapshot, hub_offline, hub_token
from ascendbridge.discovery.model_info import ModelInfo
from ascendbridge.discovery.safetensors_header import MAX_HEADER_BYTES
from ascendbridge.gatekit.report import GateReport
from ascendbridge.task_families import TASK_FAMILIES
from discovery.evidence import evidence_path, read_evidence

if TYPE_CHECKING:
    from ascendbridge.board.records import ModelRecord

_FLOAT_PREFIXES = ("F", "BF")  # F64 F32 F16 BF16 F8_* F6_* F4: floating point, counted as parameters


@dataclass
class Checks:
    items: list[dict[str, Any]] = field(default_factory=list)

    def add(self, name: str, ok: bool, detail: str = "") -> bool:
        self.items.append({"check": name, "ok": bool(ok), "detail": detail})
        return bool(ok)

    @property
    def failed(self) -> list[dict[str, Any]]:
        return [c for c in self.items if not c["ok"]]

    @property
    def summary(self) -> str:
        """How many checks passed, else the first three that failed."""
        failed = self.failed
        if not failed:
            return f"{len(self.items)} checks passed"
        return "; ".join(f"{c['check']}: {c['detail']}" for c in failed[:3])


def count_float_elements(path: Path) -> tuple[int, int]:
    """(float elements, bytes the header's tensors span) of one safetensors file."""
    with path.open("rb") as fh:
        (n,) = struct.unpack("<Q", fh.read(8))
        if n > MAX_HEADER_BYTES:
            raise ValueError(f"{path.name}: safetensors header of {n} bytes, over {MAX_HEADER_BYTES}")
        header = json.loads(fh.read(n))
    floats, end = 0, 0
    for key, t in header.items():
        if key == "__metadata__":
            continue
        if t["dtype"].startswith(_FLOAT_PREFIXES):
            floats += math.prod(t["shape"])
        end = max(end, t["data_offsets"][1])
    return floats, 8 + n + end


def resolve_directory(model: ModelRecord) -> Path:
    """Where the model's files are now, resolved from the board record (not from the claim)."""
    if model.source == "local":
        return Path(model.path or "").expanduser().resolve()
    cache = cache_dir(model.path if model.source == "hf-cache" else None)
    return cached_snapshot(model.model_id, model.revision, cache)


def check_directory(info: ModelInfo, model: ModelRecord, checks: Checks) -> None:
    directory = resolve_directory(model)
    checks.add("same_directory", str(directory) == info.local_dir, f"{directory} vs claimed {info.local_dir}")
    config = json.loads(capped_read.read_text(directory / "config.json", capped_read.CONFIG_MAX_BYTES))
    checks.add("config_matches", config == info.config, "config.json re-parsed")
    checks.add(
        "architectures_match",
        list(config.get("architectures") or []) == info.architectures,
        f"{config.get('architectures')} vs {info.architectures}",
    )
    on_disk = sorted(p.name for p in directory.glob("*.safetensors"))
    if info.parameter_count_source == "safetensors":
        total, size = 0, 0
        for name in info.weight_files:
            path = directory / name
            floats, spanned = count_float_elements(path)
            actual = path.stat().st_size
            checks.add(f"complete:{name}", spanned == actual, f"header spans {spanned} bytes, file has {actual}")
            total += floats
            size += actual
        checks.add(
            "parameter_count", total == info.parameter_count, f"recounted {total:,} vs claimed {info.parameter_count}"
        )
        checks.add("size_bytes", size == info.size_bytes, f"{size} vs claimed {info.size_bytes}")
    else:
        checks.add("no_safetensors", not on_disk, f"claimed config estimate but found {on_disk}")
        if info.parameter_count_source == "config_estimate":
            estimate = estimate_parameters(config)
            checks.add(
                "parameter_count",
                estimate == info.parameter_count,
                f"re-estimated {estimate} vs claimed {info.parameter_count}",
            )


def check_hub(info: ModelInfo, model: ModelRecord, checks: Checks) -> None:
    """Online: the Hub's own parameter count (computed server-side from the headers)."""
    from huggingface_hub import HfApi

    from ascendbridge.discovery.hub import hub_endpoint, hub_timeout

    token = hub_token()
    remote = HfApi(endpoint=hub_endpoint(), token=token or False).model_info(
        model.model_id, revision=info.resolved_revision or model.revision, timeout=hub_timeout()
    )
    checks.add("revision", remote.sha == info.resolved_revision, f"{remote.sha} vs {info.resolved_revision}")
    if info.parameter_count_source == "safetensors" and remote.safetensors is not None:
        hub_total = remote.safetensors.total
        checks.add(
            "parameter_count",
            hub_total == (info.parameter_count or 0) + info.buffer_elements,
            f"Hub counts {hub_total:,} elements vs claimed {info.parameter_count} + {info.buffer_elements}",
        )
    checks.add("gated", bool(remote.gated) == bool(info.gated), f"{remote.gated} vs {info.gated}")


def verify(info: ModelInfo, model: ModelRecord, has_token: bool | None = None) -> Checks:
    """Every check the gate runs; DiscoveryError and I/O errors become failed checks."""
    checks = Checks()
    checks.add("model_id", info.model_id == model.model_id, f"{info.model_id} vs {model.model_id}")
    checks.add("source", info.source == model.source, f"{info.source} vs {model.source}")
    checks.add(
        "task_family_known", info.task_family is None or info.task_family in TASK_FAMILIES, str(info.task_family)
    )
    runner: Callable[[ModelInfo, ModelRecord, Checks], None]
    runner = check_hub if model.source == "huggingface" and not hub_offline() else check_directory
    try:
        runner(info, model, checks)
    except Exception as exc:  # unreadable files, Hub client errors: a failed check, not a crash
        checks.add("re-read", False, f"{type(exc).__name__}: {exc}")
    token = bool(hub_token()) if has_token is None else has_token
    try:
        again = decide(info, model.allow_remote_code, token)
        checks.add(
            "decision",
            info.decision is not None and again.action == info.decision.action == "proceed",
            f"re-decided {again.action} ({again.reason})",
        )
    except DiscoveryError as exc:
        checks.add("decision", False, str(exc))
    return checks


@pydantic_dataclasses.dataclass
class DiscoveryReport(GateReport):
    """The discovery gate's answer as its checker prints it: the evidence it read and every check."""

    evidence: str = ""
    checks_run: list[dict[str, Any]] = field(default_factory=list)  # {check, ok, detail}, in order

    def problem_lines(self) -> list[str]:
        return [f"{c['check']}: {c['detail']}" for c in self.checks_run if not c["ok"]]


def latest_evidence(adaptation_name: str) -> Path | None:
    """The newest run's evidence file of a model (highest fencing token: the last attempt's), or None."""
    folder = evidence_path(adaptation_name, 0).parent
    tokens = {}
    for path in folder.glob("model_info-token*.json"):
        found = re.fullmatch(r"model_info-token(\d+)\.json", path.name)
        if found:
            tokens[int(found.group(1))] = path
    return tokens[max(tokens)] if tokens else None


def check_model(adaptation_name: str, board: Path, evidence: Path | None = None) -> DiscoveryReport:
    """Re-verify one model's discovery evidence (`evidence`, else its newest run's) against its board
    record. ValueError (the checker's exit 2) when there is no board, no such model or no evidence."""
    if not board.is_file():
        raise ValueError(f"no board at {board} (--board PATH)")
    reader = ReadOnlyBoard(board)
    try:
        model = next((m for m in reader.list_models() if m.adaptation_name == adaptation_name), None)
    finally:
        reader.close()
    if model is None:
        raise ValueError(f"no model with adaptation name '{adaptation_name}' on {board}")
    path = evidence or latest_evidence(adaptation_name)
    if path is None:
        raise ValueError(f"no discovery evidence for {adaptation_name} in {evidence_path(adaptation_name, 0).parent}")
    try:
        info = ModelInfo.model_validate(read_evidence(path))
    except (OSError, ValueError) as exc:
        raise ValueError(f"no readable discovery evidence at {path} ({type(exc).__name__})") from None
    checks = verify(info, model)
    return DiscoveryReport(
        adaptation_name, not checks.failed, checks.summary, evidence=str(path), checks_run=checks.items
    )
