"""The serving gate: re-verify an adaptation's serving evidence with the framework's code.

In order: the package's runtime is the framework's (ab_runtime/ byte-identical); the reference is
re-exported with the framework's runtime copy and must equal the saved one (tokens exactly,
embeddings to the recorded-figure tolerance, the same safetensors bytes); the plans are recomputed
from the recorded inputs and serve/ is re-rendered byte for byte; every figure is recomputed from
the saved exchanges, those of each quantized checkpoint served beside it too (with its reference
tokens computed again); then a fresh server is started exactly as serve.sh starts it and a sample
of the acceptance requests is replayed, its answers checked against the reference again.
"""

from __future__ import annotations

import json
import tempfile
from dataclasses import field
from pathlib import Path
from typing import Any

from pydantic.dataclasses import dataclass

from ab_runtime.fileops import sha256_file
from ascendbridge.config import RUNTIME_DIR
from ascendbridge.gatekit.compare import recorded_differences
from ascendbridge.gatekit.evidence import trusted_evidence
from ascendbridge.gatekit.report import GateReport
from ascendbridge.package.quant_files import accepted_checkpoints
from ascendbridge.package.spec import AdaptationSpec
from serving.accept import exchange_errors, send
from serving.env import serve_python
from serving.figures import (
    POOLED,
    acceptance_problems,
    reference_rows,
    response_rows,
    response_tokens,
    row_close,
    serving_figures,
)
from serving.plan import Refusal
from serving.quantized import record_problems as quantized_problems
from serving.render import WEIGHTS_DIR, render_texts, rendered_differences
from serving.server import ServerError, free_port, served
from serving.settings import ServingSettings
from serving.steps import EVIDENCE_FILE, REFERENCE_FILE, SCHEMA, StepError, export, plans, read_reference, server_argv

REPLAY_LOG = "serve/replay.log"


@dataclass
class ServingReport(GateReport):
    figures: dict[str, float] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    replayed: int = 0

    def problem_lines(self) -> list[str]:
        return self.problems


def _reference_problems(saved: dict[str, Any], fresh: dict[str, Any]) -> list[str]:
    if any(saved.get(k) != fresh.get(k) for k in ("tokens", "prompts", "chat")):
        return [f"{REFERENCE_FILE}: the reference tokens differ from the framework's re-export"]
    for key in ("embeddings", "logits"):
        if key in fresh and recorded_differences({key: saved.get(key)}, {key: fresh[key]}):
            return [f"{REFERENCE_FILE}: the reference {key} differ from the framework's re-export"]
    return []


def _replay_problems(exchange: dict[str, Any], reference: dict[str, Any], dtype: str) -> list[str]:
    """A replayed exchange's answer checked against the reference (as the acceptance did)."""
    where = f"replayed {exchange['kind']} request {exchange['index']}"
    if exchange.get("error"):
        return [f"{where}: no answer: {exchange['error']}"]
    if exchange.get("status") != 200:
        return [f"{where}: status {exchange.get('status')}"]
    if "tokens" in reference:
        chat = exchange["kind"] in ("chat", "chat_stream")
        expected = reference["chat"]["tokens"] if chat else reference["tokens"][exchange["index"]]
        if dtype == "float32" and response_tokens(exchange) != expected:
            return [f"{where}: served tokens differ from the reference"]
        return []
    rows = response_rows(exchange) or []
    expected_rows = reference_rows(reference)[exchange["index"] :]
    if (
        len(rows) > len(expected_rows)
        or not rows
        or not all(row_close(exchange["kind"], r, e, dtype) for r, e in zip(rows, expected_rows))
    ):
        return [f"{where}: served answers differ from the reference"]
    return []


def _reexport_problems(serve: Path, directory: Path, settings: ServingSettings, reference: dict[str, Any]) -> list[str]:
    """The reference and weights exported again with the framework's runtime, compared with the saved ones."""
    with tempfile.TemporaryDirectory(prefix="serving-gate-") as tmp:
        export(
            serve,
            directory,
            settings,
            reference.get("mode") == "pretrained",
            runtime_root=RUNTIME_DIR.parent,
            out=Path(tmp) / "weights",
            reference=Path(tmp) / "reference.json",
        )
        problems = _reference_problems(reference, json.loads((Path(tmp) / "reference.json").read_text()))
        if sha256_file(Path(tmp) / "weights" / "model.safetensors") != sha256_file(
            directory / WEIGHTS_DIR / "model.safetensors"
        ):
            problems.append(f"{WEIGHTS_DIR}/model.safetensors is not the package's reference weights")
    return problems


def check_adaptation(
    directory: Path, python: str | None = None, settings: ServingSettings | None = None, execute: bool = True
) -> ServingReport:
    """The gate's report; `execute` False checks the saved evidence only (no re-export, no server)."""
    directory = Path(directory)
    settings = settings or ServingSettings()
    name = directory.name
    evidence, why, code = trusted_evidence(directory, EVIDENCE_FILE, SCHEMA, "serving")
    if evidence is None:
        return ServingReport(name, False, why, problems=code)
    try:
        reference = read_reference(directory)
    except (OSError, json.JSONDecodeError) as exc:
        return ServingReport(name, False, f"no readable serving evidence: {exc}")
    spec = AdaptationSpec.load(directory)
    problems: list[str] = []
    serve = serve_python(python or settings.python)
    if execute and not serve.is_file():
        raise ValueError(
            f"no serve environment at {serve} (install it, once per checkout: uv run python -m serving.env)"
        )
    if execute:
        try:
            problems += _reexport_problems(serve, directory, settings, reference)
        except StepError as exc:
            return ServingReport(name, False, f"re-exporting the reference failed: {exc}", problems=[str(exc)])
    local, ascend = plans(directory, spec.task_family, evidence["plan_inputs"])
    if isinstance(local, Refusal) or isinstance(ascend, Refusal):
        return ServingReport(name, False, "the recorded inputs give a refusal, not a plan", problems=problems)
    if local.as_dict() != evidence["plan"]:
        problems.append("the recorded plan is not what the plan rule gives for the recorded inputs")
    texts = render_texts(
        spec.name,
        spec.model.model_id,
        local,
        ascend,
        evidence["plan_inputs"]["ascend_device"]["generation"],
        accepted_checkpoints(directory),
    )
    problems += rendered_differences(directory, texts)
    exchanges = evidence["exchanges"]
    bench = evidence.get("bench")
    figures = serving_figures(
        exchanges,
        reference,
        local.dtype,
        float(evidence["server"]["cold_start_s"]),
        bench,
        int(evidence["server"].get("peak_rss_bytes") or 0),
    )
    problems += [f"figure {d}" for d in recorded_differences(evidence["figures"], figures)]
    accepted = exchange_errors(exchanges) + acceptance_problems(figures, local.dtype, bench)
    if accepted != evidence["problems"]:
        problems.append("the recorded acceptance problems are not what the saved exchanges give")
    verdict = "fail" if accepted else "pass"
    if verdict != evidence.get("verdict"):
        problems.append(f"recorded verdict {evidence.get('verdict')} but the exchanges give {verdict}")
    if verdict == "pass" and settings.quantized and local.endpoint == "completions":
        problems += quantized_problems(
            serve if execute else None, directory, evidence.get("quantized") or {}, reference, figures
        )
    replayed = 0
    if execute and not problems:
        sample = [e for e in exchanges if e["kind"] in ("greedy", *POOLED)][: settings.replay] + [
            e for e in exchanges if e["kind"] in ("chat", "chat_stream")
        ]
        port = free_port()
        try:
            argv = server_argv(serve, local, spec.name, port)
            with served(argv, directory, local.env, port, settings.start_timeout_s, directory / REPLAY_LOG) as server:
                for exchange in sample:
                    problems += _replay_problems(
                        send(server.url, exchange, settings.request_timeout_s), reference, local.dtype
                    )
                    replayed += 1
        except ServerError as exc:
            problems.append(f"a fresh server did not start: {exc}")
    if problems:
        return ServingReport(name, False, problems[0], figures=figures, problems=problems, replayed=replayed)
    if verdict != "pass":
        return ServingReport(
            name, False, f"acceptance failed: {evidence['problems'][0]}", figures=figures, replayed=replayed
        )
    return ServingReport(
        name,
        True,
        f"serving evidence re-derived; {replayed} request(s) replayed on a fresh server with the reference's answers",
        figures=figures,
        replayed=replayed,
    )
