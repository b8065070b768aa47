"""The training gate: re-verify an adaptation's training evidence with the framework's code.

In order: train.py is what the framework renders from the recorded config and ab_runtime/ is the
framework's (byte-identical); the contract config is the training config's K-step twin; every
proposed figure is recomputed from the saved logs (the out-of-memory ladder's micro-batch and
fallbacks in the result must be the step log's), and the TensorBoard event file, read back with
TensorBoard's reader, holds exactly the step log's and the evaluation's figures (so the view people
open is the gated evidence, not a stale or edited copy); then ab_runtime.train.verify runs from the
framework's copy of ab_runtime in the package's interpreter: it recomputes the contract verdict
from contract.json's two logs and the evaluation verdict from the saved losses, checks every
checkpoint's digests and the step log against the losses the checkpoints recorded (an edited
metrics.jsonl fails), re-runs the step after a checkpoint bit for bit and reloads the final
weights (their digest and the held-out loss).
"""

from __future__ import annotations

import json
import tempfile
from dataclasses import field
from pathlib import Path
from typing import Any

from pydantic.dataclasses import dataclass

from ab_runtime.result import read_result
from ascendbridge.config import RUNTIME_DIR
from ascendbridge.gatekit.compare import recorded_differences
from ascendbridge.gatekit.envs import EnvError, adaptation_python, model_run_env
from ascendbridge.gatekit.integrity import code_problems
from ascendbridge.gatekit.report import GateReport, untrusted_summary
from ascendbridge.package.spec import AdaptationSpec
from ascendbridge.package.train_files import RUN_DIR
from ascendbridge.workers.process import run_command
from training.figures import (
    EVENTS_DIR,
    FIGURES_FILE,
    event_scalars,
    ladder_problems,
    passes_problems,
    profile_problems,
    read_events,
    read_passes,
    read_peak,
    read_profile,
    step_log,
    training_figures,
)
from training.render import CONTRACT_CONFIG, TRAIN_CONFIG, TRAIN_PY, contract_config, render_train_py_text

VERIFY_TIMEOUT_S = 3000.0


@dataclass
class TrainingReport(GateReport):
    figures: dict[str, float] = field(default_factory=dict)
    verified: list[dict[str, Any]] = field(default_factory=list)  # ab_runtime.train.verify's checks
    problems: list[str] = field(default_factory=list)

    def problem_lines(self) -> list[str]:
        return self.problems


def _json(path: Path) -> Any:
    return json.loads(path.read_text())


def _verify(python: Path, directory: Path, train: dict[str, Any], world: int) -> tuple[list[dict[str, Any]], str]:
    """ab_runtime.train.verify from the framework's runtime (cwd outside the package, so its copy is
    never imported), under the torchrun line the run used; (its checks, an error or "")."""
    with tempfile.TemporaryDirectory(prefix="training-gate-") as tmp:
        config = Path(tmp) / "train.json"
        config.write_text(json.dumps({**train, "corpus": str((directory / train["corpus"]).resolve())}))
        launcher = ["-m", "torch.distributed.run", "--standalone", "--nproc_per_node", str(world)] if world > 1 else []
        command = run_command(
            [
                str(python),
                *launcher,
                "-m",
                "ab_runtime.train.verify",
                "--config",
                str(config),
                "--out",
                str((directory / RUN_DIR).resolve()),
            ],
            cwd=Path(tmp),
            env=model_run_env({"PYTHONPATH": str(RUNTIME_DIR.parent)}),
            timeout_s=VERIFY_TIMEOUT_S,
        )
    result = read_result(command.output) or {}
    checks = list(result.get("checks") or [])
    if not checks:
        return [], result.get("error") or ("timed out" if command.timed_out else command.tail(3))
    return checks, ""


def check_adaptation(directory: Path, python: str | None = None, execute: bool = True) -> TrainingReport:
    """The gate's report; `execute` False checks the saved evidence only (no re-run)."""
    directory = Path(directory)
    name = directory.name
    try:
        train, contract_cfg = _json(directory / TRAIN_CONFIG), _json(directory / CONTRACT_CONFIG)
        spec = AdaptationSpec.load(directory)
        expected = {TRAIN_PY: render_train_py_text(spec.model.model_id, train)}
    except (OSError, ValueError, KeyError) as exc:
        return TrainingReport(name, False, f"no readable training package: {exc}")
    code = code_problems(directory, expected)
    if code:
        return TrainingReport(name, False, untrusted_summary(code), problems=code)
    problems: list[str] = []
    if contract_cfg != contract_config(train, contract_cfg.get("steps")):
        problems.append(f"{CONTRACT_CONFIG} is not the training config's baseline-contract twin")
    if (trained := train.get("proxy_depth")) != (spec.model.proxy.layers if spec.model.proxy else None):
        wanted = spec.model.proxy.label() if spec.model.proxy else "the full depth"
        problems.append(f"{TRAIN_CONFIG} trains depth {trained or 'full'}; the registered model is {wanted}")
    run = directory / RUN_DIR
    try:
        result, contract = _json(run / "train_result.json"), _json(run / "contract.json")
        supervision = _json(run / "supervision.json") if (run / "supervision.json").is_file() else {}
        steps = step_log(run)
        profile, passes = read_profile(run), read_passes(run)
        problems += profile_problems(run, profile) + passes_problems(passes, train)
        figures = training_figures(result, steps, contract, supervision, profile, passes, read_peak(run))
        problems += [f"figure {d}" for d in recorded_differences(_json(run / FIGURES_FILE), figures)]
        problems += ladder_problems(result, steps)
        if read_events(run / EVENTS_DIR) != event_scalars(run):
            problems.append(f"the TensorBoard events in {RUN_DIR}/{EVENTS_DIR} are not the step log's figures")
    except (OSError, ValueError, KeyError, IndexError) as exc:
        return TrainingReport(name, False, f"no readable training evidence: {exc}", problems=[*problems, str(exc)])
    verified: list[dict[str, Any]] = []
    if execute:
        try:
            interpreter = adaptation_python(directory, python)
        except EnvError as exc:  # no interpreter to re-run with: bad input (exit 2), not a failed gate
            raise ValueError(str(exc)) from None
        verified, error = _verify(interpreter, directory, train, int(result.get("world", 1)))
        if error:
            problems.append(f"ab_runtime.train.verify did not run: {error}")
        problems += [f"{c['name']}: {c['detail'] or 'failed'}" for c in verified if not c["passed"]]
    if problems:
        return TrainingReport(name, False, problems[0], figures=figures, verified=verified, problems=problems)
    return TrainingReport(
        name,
        True,
        f"training evidence re-derived: contract and evaluation recomputed, "
        f"{len(verified)} checks re-executed (a step re-run from a checkpoint, the final "
        f"weights reloaded)"
        if execute
        else "training evidence re-derived (not re-executed)",
        figures=figures,
        verified=verified,
    )
