"""One scheme's evidence record and the figures the board gets, built the same way by the run and
re-derived by the gate: the verdict is the standard's (ab_runtime/quant/standard.py, standard
library only) applied to the evaluation's figures, never the run's word."""

from __future__ import annotations

from pathlib import Path
from typing import Any, cast

from ab_runtime.quant.standard import STANDARD_NAME, judge
from quantization.steps import MODEL_DIR, WORK_DIR, checkpoint_digest, checkpoint_files, checkpoint_format, file_bytes

EVALUATION_REFUSED = 2  # ab_runtime.quant.evaluate: the checkpoint disagrees with its description
BOARD_FIGURES = ("cosine_min", "max_abs_err_scaled", "perplexity_rel_delta", "top1_agreement")


def verdict_of(scheme: str, exit_code: int | None, figures: dict[str, float] | None) -> tuple[str, str]:
    """(accepted | refused, why) of a scheme from its evaluation's exit code and figures."""
    if exit_code == EVALUATION_REFUSED:
        return "refused", "the checkpoint disagrees with its description (ab_runtime.quant.evaluate exit 2)"
    if exit_code not in (0, 1) or figures is None:
        return "refused", f"the evaluation gave no figures (exit {exit_code})"
    rules = cast(dict[str, dict[str, Any]], judge(scheme, figures)["rules"])
    failing = [name for name, rule in rules.items() if not rule["passed"]]
    if failing:
        return "refused", f"outside {STANDARD_NAME}: {', '.join(failing)}"
    return "accepted", f"within {STANDARD_NAME}"


def weight_bytes(directory: Path, scheme: str) -> tuple[int, int]:
    """(float model's weight files, checkpoint's files) in bytes, as they lie on disk."""
    before = file_bytes(sorted((directory / MODEL_DIR).glob("*.safetensors")))
    return before, file_bytes(checkpoint_files(directory / WORK_DIR / scheme))


def scheme_record(
    directory: Path,
    scheme: str,
    *,
    tool: dict[str, str],
    practice: dict[str, str],
    argv: list[str],
    quantize_s: float,
    evaluation: tuple[int | None, dict[str, Any] | None, str],
) -> dict[str, Any]:
    code, report, tail = evaluation
    figures = (report or {}).get("figures")
    verdict, reason = verdict_of(scheme, code, figures)
    before, after = weight_bytes(directory, scheme)
    return {
        "tool": tool,
        "practice": practice,
        "argv": argv,
        "quantize_s": quantize_s,
        "checkpoint": f"{WORK_DIR}/{scheme}",
        "format": checkpoint_format(directory / WORK_DIR / scheme),
        "digest": checkpoint_digest(directory / WORK_DIR / scheme),
        "weight_bytes_before": before,
        "weight_bytes_after": after,
        "size_ratio": after / before if before else 0.0,
        "evaluation": {
            "exit_code": code,
            "inputs": (report or {}).get("inputs"),
            "seconds": (report or {}).get("seconds"),
            "peak_rss_mb": (report or {}).get("peak_rss_mb"),
            "output_tail": tail if report is None else "",
        },
        "figures": figures,
        "verdict": verdict,
        "reason": reason,
    }


def board_figures(schemes: dict[str, dict[str, Any]]) -> tuple[dict[str, float], dict[str, str]]:
    """Per scheme `<scheme>_<figure>` (lower case), its size ratio and 1/0 accepted; their units."""
    values: dict[str, float] = {}
    for scheme, record in schemes.items():
        slug = scheme.lower()
        for name in BOARD_FIGURES:
            if record.get("figures") and name in record["figures"]:
                values[f"{slug}_{name}"] = float(record["figures"][name])
        values[f"{slug}_size_ratio"] = float(record["size_ratio"])
        values[f"{slug}_accepted"] = 1.0 if record["verdict"] == "accepted" else 0.0
    return values, {k: "x" for k in values if k.endswith("_size_ratio")}
