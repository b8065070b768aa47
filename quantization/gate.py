"""The quantization gate: re-verify an adaptation's quantization evidence with the framework's code.

In order: the package's runtime is the framework's (ab_runtime/ byte-identical); the calibration
sample is the one the framework ships; the float model and every checkpoint digest to what was
recorded (an edited scale or a swapped tensor changes the digest); each recorded verdict is what
the standard gives for the recorded figures; then each checkpoint is evaluated again in a fresh
process with the framework's runtime copy (its consistency check and its reference forward), and
every figure must reproduce.
"""

from __future__ import annotations

import tempfile
from dataclasses import field
from pathlib import Path
from typing import Any

from pydantic.dataclasses import dataclass

from ascendbridge.gatekit.compare import recorded_differences
from ascendbridge.gatekit.evidence import trusted_evidence
from ascendbridge.gatekit.report import GateReport
from ascendbridge.package.generator import RUNTIME_DIR
from quantization.env import tool_binary, tool_python
from quantization.evidence import verdict_of, weight_bytes
from quantization.settings import QuantizationSettings
from quantization.steps import (
    CALIBRATION,
    EVAL_THREADS,
    EVIDENCE_FILE,
    MODEL_DIR,
    SCHEMA,
    WORK_DIR,
    calibration_record,
    checkpoint_digest,
    checkpoint_format,
    evaluate,
    model_digest,
)


@dataclass
class QuantizationReport(GateReport):
    usable: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    reevaluated: int = 0

    def problem_lines(self) -> list[str]:
        return self.problems


def _evidence_problems(directory: Path, evidence: dict[str, Any]) -> list[str]:
    """What the saved files and the recorded figures say without running anything."""
    problems = []
    calibration = evidence.get("calibration") or {}
    shipped = calibration_record(CALIBRATION)
    copy = directory / str(calibration.get("path", ""))
    if not copy.is_file() or calibration_record(copy) != shipped:
        problems.append(f"{calibration.get('path')}: not the framework's calibration sample {shipped['sha256']}")
    elif {k: calibration.get(k) for k in shipped} != shipped:
        problems.append("the recorded calibration (file, sha256, n) is not the sample's")
    if model_digest(directory / MODEL_DIR) != (evidence.get("model") or {}).get("digest"):
        problems.append(f"{MODEL_DIR}: the float model's files differ from the recorded digest")
    if evidence.get("eval_threads") != EVAL_THREADS:
        problems.append(
            f"recorded eval_threads {evidence.get('eval_threads')}, the framework evaluates with {EVAL_THREADS}"
        )
    schemes = evidence.get("schemes") or {}
    if not schemes:
        problems.append("no scheme recorded")
    for scheme, record in schemes.items():
        checkpoint = directory / WORK_DIR / scheme
        if record.get("checkpoint") != f"{WORK_DIR}/{scheme}" or not checkpoint.is_dir():
            problems.append(f"{scheme}: no checkpoint at {WORK_DIR}/{scheme}")
            continue
        if record.get("format", "ascendv1") != checkpoint_format(checkpoint):
            problems.append(
                f"{scheme}: recorded format {record.get('format')}, the files are {checkpoint_format(checkpoint)}"
            )
        if checkpoint_digest(checkpoint) != record.get("digest"):
            problems.append(f"{scheme}: the checkpoint's files differ from the recorded digest")
        if list(weight_bytes(directory, scheme)) != [
            record.get("weight_bytes_before"),
            record.get("weight_bytes_after"),
        ]:
            problems.append(f"{scheme}: the recorded weight bytes are not the files'")
        expected = verdict_of(scheme, record["evaluation"].get("exit_code"), record.get("figures"))
        if list(expected) != [record.get("verdict"), record.get("reason")]:
            problems.append(f"{scheme}: recorded verdict {record.get('verdict')}, the standard gives {expected[0]}")
    usable = [s for s, r in schemes.items() if r.get("verdict") == "accepted"]
    if evidence.get("usable") != usable:
        problems.append(f"recorded usable schemes {evidence.get('usable')}, the verdicts give {usable}")
    return problems


def _reevaluation_problems(
    directory: Path, evidence: dict[str, Any], python: Path, settings: QuantizationSettings
) -> tuple[list[str], int]:
    """Each checkpoint evaluated again with the framework's runtime copy: exit code and figures."""
    problems = []
    done = 0
    with tempfile.TemporaryDirectory() as tmp:
        for scheme, record in evidence["schemes"].items():
            code, report, tail = evaluate(
                python,
                directory / MODEL_DIR,
                directory / WORK_DIR / scheme,
                settings.eval_timeout_s,
                cwd=Path(tmp),
                runtime_root=RUNTIME_DIR.parent,
            )
            done += 1
            if code != record["evaluation"].get("exit_code"):
                problems.append(
                    f"{scheme}: the fresh evaluation exits {code} ({tail}), recorded {record['evaluation'].get('exit_code')}"
                )
                continue
            fresh = (report or {}).get("figures")
            problems += [f"{scheme}: figure {d}" for d in recorded_differences(record.get("figures"), fresh)]
    return problems, done


def check_adaptation(
    directory: Path, python: str | None = None, settings: QuantizationSettings | None = None, execute: bool = True
) -> QuantizationReport:
    """The gate's report; `execute` False checks the saved evidence and files only (no evaluation)."""
    directory = Path(directory)
    settings = settings or QuantizationSettings()
    name = directory.name
    evidence, why, code = trusted_evidence(directory, EVIDENCE_FILE, SCHEMA, "quantization")
    if evidence is None:
        return QuantizationReport(name, False, why, problems=code)
    interpreter = tool_python(python or settings.python)
    if execute and not tool_binary(interpreter).is_file():
        raise ValueError(
            f"no quantization tool environment at {interpreter} (install it: uv run python -m quantization.env)"
        )
    problems = _evidence_problems(directory, evidence)
    reevaluated = 0
    if execute and not problems:
        more, reevaluated = _reevaluation_problems(directory, evidence, interpreter, settings)
        problems += more
    usable = list(evidence.get("usable") or [])
    if problems:
        return QuantizationReport(name, False, problems[0], usable=usable, problems=problems, reevaluated=reevaluated)
    return QuantizationReport(
        name,
        True,
        f"quantization evidence re-derived; {reevaluated} checkpoint(s) re-evaluated with the same figures; "
        f"usable: {', '.join(usable) or 'none'}",
        usable=usable,
        reevaluated=reevaluated,
    )
