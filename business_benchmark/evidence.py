"""Business evidence: metrics, checks and verdict derived from one predictions file.

The runner (business_run.py, in the adaptation's env) writes `business_predictions_<stem>.json`;
`build_evidence` turns it into `business_metrics_<stem>.json` with the framework's metrics and
pass rule, naming the predictions file and its sha256. The gate calls `derive` again on the same
predictions and must get the same numbers.
"""

from __future__ import annotations

import datetime
import json
from pathlib import Path
from typing import Any

from ab_runtime.fileops import write_text_atomic
from business_benchmark import metrics as task_metrics
from business_benchmark.datasets import DatasetError, load_card, load_items, sha256_file
from business_benchmark.lm_eval_path import derive_lm_eval
from business_benchmark.pass_rule import PassRule, checks, verdict

SCHEMA = "ascendbridge.business_metrics/1"
PREDICTIONS_PREFIX = "business_predictions_"
METRICS_PREFIX = "business_metrics_"
AGREEMENT_ONLY = "agreement only: config-initialised weights have no task skill, so no task scores"
WITH_TASK_SCORES = "task scores against gold (real weights) and target/reference agreement"


def stem(device: str, dtype: str, mode: str) -> str:
    return f"{device}_{dtype}_{mode}"


def read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise DatasetError(f"{Path(path).name} is unreadable: {exc}") from None
    if not isinstance(data, dict):
        raise DatasetError(f"{Path(path).name} is not a JSON object")
    return data


def read_metrics(path: Path) -> dict[str, Any]:
    """A business_metrics_*.json (its schema checked); DatasetError with one line otherwise."""
    data = read_json(path)
    if data.get("schema") != SCHEMA or not isinstance(data.get("evaluations"), list):
        raise DatasetError(f"{Path(path).name} is not a business metrics file (schema != {SCHEMA})")
    return data


def gold_items(set_name: str) -> dict[str, dict[str, Any]]:
    """The framework's copy of a set, digest-checked against its data card, keyed by item id."""
    return {str(item["id"]): item for item in load_items(load_card(set_name))}


def derive_evaluation(evaluation: dict[str, Any], real: bool, rule: PassRule) -> dict[str, Any]:
    """Metrics, checks and verdict of one saved evaluation (raises DatasetError / ValueError)."""
    name, task = str(evaluation.get("set")), str(evaluation.get("task"))
    card = load_card(name)
    if card.sha256 is not None and evaluation.get("set_sha256") != card.sha256:
        raise DatasetError(
            f"{name}: the run read a set with sha256 {str(evaluation.get('set_sha256'))[:12]}..., "
            f"not the one its data card describes ({card.sha256[:12]}...)"
        )
    gold = gold_items(name)
    items = evaluation.get("items") or []
    unknown = [it.get("id") for it in items if str(it.get("id")) not in gold]
    if unknown:
        raise DatasetError(f"{name}: predictions for items not in the set: {unknown[:3]}")
    try:
        result = task_metrics.evaluate(task, items, gold, real)
    except (KeyError, TypeError, IndexError) as exc:
        raise ValueError(f"{name}:{task}: predictions are malformed ({type(exc).__name__}: {exc})") from None
    found = checks(result, rule)
    timing = evaluation.get("timing") or {}
    target_s = float(timing.get("target_s") or 0.0)
    tokens = int(timing.get("generated_tokens") or 0)
    return {
        "set": name,
        "task": task,
        "items": len(items),
        "dataset": {"sha256": card.sha256, "licence": card.licence, "kind": card.kind},
        "metrics": result,
        "checks": found,
        "verdict": verdict(found),
        "timing": {
            **timing,
            "target_items_per_s": len(items) / target_s if target_s else None,
            "target_tokens_per_s": tokens / target_s if target_s and tokens else None,
        },
    }


def derive_lm_eval_evaluation(section: dict[str, Any], real: bool, rule: PassRule) -> dict[str, Any]:
    """The lm-eval tasks as one evaluation: task scores with real weights; with config-initialised
    weights the target-minus-reference differences, reported and not judged."""
    scores = derive_lm_eval(section)["task"]
    if real:
        result: dict[str, Any] = {"task": scores, "agreement": {}}
    else:
        result = {
            "task": {},
            "agreement": {
                f"{k}.target_minus_reference": v.get("target", 0.0) - v.get("reference", 0.0) for k, v in scores.items()
            },
        }
    found = checks(result, rule)
    return {
        "set": "lm-eval",
        "task": "lm_eval",
        "items": sum(len(v) for v in (section.get("target") or {}).get("samples", {}).values()),
        "dataset": {
            "sha256": section.get("include_sha256"),
            "licence": "see the lm-eval task definitions",
            "kind": "lm_eval",
            "tasks": section.get("tasks"),
        },
        "metrics": result,
        "checks": found,
        "verdict": "pass" if all(c["passed"] for c in found) else "fail",
        "timing": {},
    }


def derive(predictions: dict[str, Any], rule: PassRule) -> dict[str, Any]:
    """Everything in a metrics file that follows from the predictions and the rule."""
    real = predictions.get("mode") == "pretrained"
    evaluations = [derive_evaluation(ev, real, rule) for ev in predictions.get("evaluations") or []]
    if predictions.get("lm_eval"):
        evaluations.append(derive_lm_eval_evaluation(predictions["lm_eval"], real, rule))
    if not evaluations:
        raise ValueError("the predictions hold no evaluations")
    return {
        "weights": "real" if real else "config-initialised",
        "scores": WITH_TASK_SCORES if real else AGREEMENT_ONLY,
        "evaluations": evaluations,
        "verdict": "pass" if all(e["verdict"] == "pass" for e in evaluations) else "fail",
    }


def build_evidence(predictions_path: Path, rule: PassRule, notes: list[str] | None = None) -> Path:
    """Write business_metrics_<stem>.json next to the predictions; return its path."""
    predictions_path = Path(predictions_path)
    predictions = read_json(predictions_path)
    derived = derive(predictions, rule)
    run = {
        k: predictions.get(k) for k in ("device", "device_name", "dtype", "mode", "tokenizer", "pooling", "reference")
    }
    evidence = {
        "schema": SCHEMA,
        "created_at": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "model_id": predictions.get("model_id"),
        "adaptation": predictions.get("adaptation"),
        "task_family": predictions.get("task_family"),
        "run": run,
        "environment": predictions.get("environment"),
        "rule": rule.as_dict(),
        "notes": list(notes or []),
        "predictions": {"file": predictions_path.name, "sha256": sha256_file(predictions_path)},
        **derived,
    }
    name = predictions_path.name.replace(PREDICTIONS_PREFIX, METRICS_PREFIX, 1)
    out = predictions_path.with_name(name)
    write_text_atomic(out, json.dumps(evidence, indent=2, sort_keys=True) + "\n")
    return out


def find_metrics(adaptation_dir: Path) -> list[Path]:
    return sorted(Path(adaptation_dir).glob(f"{METRICS_PREFIX}*.json"))


def board_values(evidence: dict[str, Any]) -> tuple[dict[str, float], dict[str, str]]:
    """Flat numeric figures for the board's metrics table: `<set>.<metric>` (target's task score,
    reference's as `<set>.<metric>.reference`), agreement metrics, and `business_pass`."""
    values: dict[str, float] = {}
    for ev in evidence.get("evaluations", []):
        for name, pair in ev["metrics"]["task"].items():
            for which, suffix in (("target", ""), ("reference", ".reference")):
                if isinstance(pair.get(which), (int, float)):
                    values[f"{ev['set']}.{name}{suffix}"] = float(pair[which])
        for name, value in ev["metrics"]["agreement"].items():
            if isinstance(value, (int, float)):
                values[f"{ev['set']}.{name}"] = float(value)
    values["business_pass"] = 1.0 if evidence.get("verdict") == "pass" else 0.0
    values["real_weights"] = 1.0 if evidence.get("weights") == "real" else 0.0
    return values, {}
