"""The business benchmark gate: re-verify an adaptation's business evidence by execution.

First, the code: business_run.py must be what the framework renders for the spec and ab_runtime/
(where ab_runtime.business, the code that made the predictions, lives) byte-identical to the
framework's copy (ascendbridge.gatekit.integrity). Then, for every business_metrics_*.json:
1. the predictions file it names exists and has the recorded sha256 (not edited after the run);
2. every set the run read has its data card's sha256, and so do the framework's copy and the
   adaptation's copy of the set;
3. every metric, check and verdict recomputed from the predictions with the framework's code and
   the stricter of the recorded and the framework's pass rule equals the recorded one;
4. a sample of items is re-run on the target with the framework's business_run.py and runtime
   (in the adaptation's interpreter): the fresh predictions must equal the saved ones (floats to
   1e-4 of their scale; labels and tokens exactly); evidence from a device that is not present
   here is noted, not re-run;
5. the pass rule holds.
"""

from __future__ import annotations

import tempfile
from dataclasses import field
from pathlib import Path
from typing import Any

from pydantic.dataclasses import dataclass

from ascendbridge.gatekit.compare import recorded_differences
from ascendbridge.gatekit.envs import EnvError, adaptation_python, run_inner
from ascendbridge.gatekit.integrity import code_problems
from ascendbridge.gatekit.report import EvidenceCheck, GateReport, untrusted_summary
from ascendbridge.package.spec import AdaptationSpec
from business_benchmark.datasets import DATA_DIR, DatasetError, load_card, sha256_file, verify_file
from business_benchmark.evidence import derive, find_metrics, read_json, read_metrics
from business_benchmark.pass_rule import PassRule
from business_benchmark.render import BUSINESS_RUN, DATA_SUBDIR, render_business_run_text

RERUN = Path(__file__).resolve().parent / "inner" / "rerun.py"
RERUN_TIMEOUT_S = 900.0
SAMPLE_PER_EVALUATION = 2
FLOAT_TOLERANCE = 1e-4
DEVICE_MISSING_MARK = "is not available"


@dataclass
class BusinessGateReport(GateReport):
    """One EvidenceCheck per business_metrics_*.json."""

    evidence: list[EvidenceCheck] = field(default_factory=list)

    def checks(self) -> list[EvidenceCheck]:
        return self.evidence


def recompute_problems(evidence: dict[str, Any], predictions: dict[str, Any], rule: PassRule) -> list[str]:
    try:
        fresh = derive(predictions, rule)
    except (DatasetError, ValueError) as exc:
        return [str(exc)]
    diffs: list[str] = []
    for key in ("weights", "scores", "verdict"):
        diffs += recorded_differences(evidence.get(key), fresh[key], key)
    recorded_evs = evidence.get("evaluations") or []
    if len(recorded_evs) != len(fresh["evaluations"]):
        return diffs + [f"evaluations: {len(recorded_evs)} recorded, {len(fresh['evaluations'])} in the predictions"]
    for rec, new in zip(recorded_evs, fresh["evaluations"]):
        for key in ("set", "task", "items", "metrics", "checks", "verdict"):
            diffs += recorded_differences(rec.get(key), new[key], f"{new['set']}.{key}")
    return [f"metric does not recompute: {d}" for d in diffs[:5]]


def dataset_problems(predictions: dict[str, Any], adaptation_dir: Path) -> list[str]:
    problems = []
    for ev in predictions.get("evaluations") or []:
        try:
            card = load_card(str(ev.get("set")))
        except DatasetError as exc:
            problems.append(str(exc))
            continue
        if card.sha256 is None:
            continue
        if ev.get("set_sha256") != card.sha256:
            problems.append(f"{card.name}: the run read a set that does not match its data card's sha256")
        for label, where in (("adaptation copy", adaptation_dir / DATA_SUBDIR), ("framework copy", DATA_DIR)):
            problem = verify_file(card, where / str(card.file))
            if problem:
                problems.append(f"{label}: {problem}")
    return problems


def _float_leaves(value: Any) -> list[float]:
    if isinstance(value, float):
        return [value]
    if isinstance(value, list):
        return [x for v in value for x in _float_leaves(v)]
    if isinstance(value, dict):
        return [x for v in value.values() for x in _float_leaves(v)]
    return []


def _same_prediction(saved: Any, fresh: Any) -> bool:
    if isinstance(saved, dict) and isinstance(fresh, dict):
        return set(saved) == set(fresh) and all(_same_prediction(saved[k], fresh[k]) for k in saved)
    if isinstance(saved, list) and isinstance(fresh, list):
        if len(saved) != len(fresh):
            return False
        leaves = _float_leaves(saved)
        if leaves and len(leaves) == len(saved):
            scale = max(max(abs(x) for x in leaves), 1e-12)
            return all(abs(a - b) <= FLOAT_TOLERANCE * scale for a, b in zip(saved, fresh))
        return all(_same_prediction(a, b) for a, b in zip(saved, fresh))
    if isinstance(saved, float) or isinstance(fresh, float):
        return isinstance(fresh, (int, float)) and abs(saved - fresh) <= FLOAT_TOLERANCE * max(abs(saved), 1.0)
    return saved == fresh


def rerun_problems(predictions: dict[str, Any], adaptation_dir: Path, python: Path) -> tuple[list[str], list[str]]:
    """(problems, notes) from re-running a sample of items with the framework's runner."""
    evaluations = predictions.get("evaluations") or []
    sample = {str(it["id"]) for ev in evaluations for it in (ev.get("items") or [])[:SAMPLE_PER_EVALUATION]}
    args = [
        "--device",
        str(predictions.get("device")),
        "--dtype",
        str(predictions.get("dtype")),
        "--items",
        ",".join(sorted(sample)),
        "--data-dir",
        str(adaptation_dir / DATA_SUBDIR),
        "--threads",
        str(int((predictions.get("environment") or {}).get("torch_threads") or 0)),
    ]
    args += [f"--eval={ev.get('set')}:{ev.get('task')}" for ev in evaluations]
    if predictions.get("mode") == "pretrained":
        args.append("--use-pretrained")
    with tempfile.TemporaryDirectory(prefix="business-rerun-") as tmp:
        script = Path(tmp) / BUSINESS_RUN
        script.write_text(
            render_business_run_text(str(predictions.get("model_id")), str(predictions.get("task_family")))
        )
        out = Path(tmp) / "rerun.json"
        res = run_inner(
            python, str(RERUN), [str(script), *args, "--out", str(out)], cwd=adaptation_dir, timeout_s=RERUN_TIMEOUT_S
        )
        if res.exit_code != 0 and DEVICE_MISSING_MARK in res.output:
            return [], [f"re-run skipped: device {predictions.get('device')} is not available here"]
        if res.exit_code != 0 or not out.is_file():
            return [f"re-run of the sample failed (exit {res.exit_code}): {res.tail(2)}"], []
        fresh = read_json(out)
    problems = []
    saved_items = {
        (ev.get("set"), ev.get("task"), str(it["id"])): it for ev in evaluations for it in (ev.get("items") or [])
    }
    for ev in fresh.get("evaluations") or []:
        for item in ev.get("items") or []:
            saved = saved_items.get((ev["set"], ev["task"], str(item["id"])))
            for which in ("reference", "target"):
                if saved is None or not _same_prediction(saved.get(which), item[which]):
                    problems.append(f"{ev['set']} item {item['id']}: saved {which} prediction differs from a re-run")
    return problems, [f"re-ran {len(sample)} item(s) on {predictions.get('device')} {predictions.get('dtype')}"]


def check_file(metrics_path: Path, adaptation_dir: Path, python: Path) -> EvidenceCheck:
    name = metrics_path.name
    try:
        evidence = read_json(metrics_path)
        pred_info = evidence.get("predictions") or {}
        pred_path = adaptation_dir / str(pred_info.get("file"))
        if not pred_path.is_file():
            return EvidenceCheck(name, False, None, [f"predictions file {pred_info.get('file')} not found"])
        if sha256_file(pred_path) != pred_info.get("sha256"):
            return EvidenceCheck(
                name,
                False,
                None,
                [
                    f"{pred_path.name}: sha256 does not match the metrics file "
                    "(predictions edited or truncated after the run)"
                ],
            )
        predictions = read_json(pred_path)
    except DatasetError as exc:
        return EvidenceCheck(name, False, None, [str(exc)])
    rule, notes = PassRule.from_record(evidence.get("rule"))
    problems = dataset_problems(predictions, adaptation_dir)
    problems += recompute_problems(evidence, predictions, rule)
    if not problems:
        more, rerun_notes = rerun_problems(predictions, adaptation_dir, python)
        problems += more
        notes += rerun_notes
    return EvidenceCheck(name, not problems, evidence.get("verdict") if not problems else None, problems, notes)


def untrusted_code(adaptation_dir: Path) -> list[str]:
    """ascendbridge.gatekit.integrity for business_run.py rendered from the spec, and ab_runtime/."""
    try:
        spec = AdaptationSpec.load(adaptation_dir)
    except (OSError, ValueError) as exc:
        return [f"cannot render {BUSINESS_RUN} to compare: {str(exc).splitlines()[0]}"]
    return code_problems(
        adaptation_dir, {BUSINESS_RUN: render_business_run_text(spec.model.model_id, spec.task_family)}
    )


def check_adaptation(adaptation_dir: Path, python_override: str | None = None) -> BusinessGateReport:
    """The full gate for one adaptation directory; never raises for bad evidence."""
    adaptation_dir = Path(adaptation_dir)
    name = adaptation_dir.name
    files = find_metrics(adaptation_dir)
    if not files:
        return BusinessGateReport(
            name, False, "no business_metrics_*.json: the business benchmark has not produced evidence"
        )
    untrusted = untrusted_code(adaptation_dir)
    if untrusted:
        return BusinessGateReport(name, False, untrusted_summary(untrusted))
    try:
        python = adaptation_python(adaptation_dir, python_override)
    except EnvError as exc:
        return BusinessGateReport(name, False, str(exc))
    checked = [check_file(path, adaptation_dir, python) for path in files]
    bad = [c for c in checked if not c.consistent]
    if bad:
        return BusinessGateReport(
            name,
            False,
            f"{len(bad)} of {len(checked)} evidence file(s) failed: {bad[0].metrics_file}: {bad[0].problems[0]}",
            checked,
        )
    failed = [c for c in checked if c.verdict != "pass"]
    if failed:
        evidence = read_metrics(adaptation_dir / failed[0].metrics_file)
        first = next(
            (f"{ev['set']} {c['metric']}" for ev in evidence["evaluations"] for c in ev["checks"] if not c["passed"]),
            "no checks",
        )
        return BusinessGateReport(name, False, f"pass rule failed in {failed[0].metrics_file} ({first})", checked)
    return BusinessGateReport(name, True, f"{len(checked)} business evidence file(s) verified, pass rule held", checked)
