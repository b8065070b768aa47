"""HEALING_STAGE: the team lead's entry point to the healer (ascendbridge.stage_api.Stage).

run(ctx) heals the adaptation the Adaptation stage rendered (see loop.py) and proposes
done / failed / blocked with the diagnosis and every attempt; gate(ctx) re-verifies
independently (see gate.py). Nothing here trusts what run() said.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from adaptation.healing.gate import healing_gate
from adaptation.healing.loop import heal
from adaptation.healing.rules import FixContext
from adaptation.healing.settings import HealingSettings
from adaptation.spec import AdaptationSpec
from ascendbridge.board.records import ModelRecord
from ascendbridge.stage_api import GateResult, StageContext, StageOutcome

TOKEN_VARIABLES = ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN")


def model_config(model: ModelRecord, spec: AdaptationSpec) -> dict[str, Any]:
    """The model's config.json as discovery stored it, else read from a local model directory."""
    config = (model.metadata or {}).get("config")
    if isinstance(config, dict) and config:
        return config
    if spec.model.path:
        try:
            value = json.loads((Path(spec.model.path) / "config.json").read_text())
        except (OSError, json.JSONDecodeError):
            value = None
        if isinstance(value, dict):
            return value
    return {}


def fix_context(ctx: StageContext, spec: AdaptationSpec) -> FixContext:
    return FixContext(
        model_config=model_config(ctx.model, spec),
        allow_remote_code=ctx.model.allow_remote_code,
        has_hf_token=any(os.environ.get(name) for name in TOKEN_VARIABLES),
    )


class HealingStage:
    name = "healing"

    def run(self, ctx: StageContext) -> StageOutcome:
        try:
            settings = HealingSettings.from_sources(ctx.settings)
            spec = AdaptationSpec.load(ctx.adaptation_dir)
        except ValueError as exc:
            return StageOutcome("failed", str(exc), diagnosis={"rule": "bad_input", "summary": str(exc)})
        report = heal(ctx.adaptation_dir, settings, fix_context(ctx, spec), ctx.say, ctx.log)
        fixes = report.fixes
        result = {
            "attempts": [a.as_dict() for a in report.attempts],
            "fixes": fixes,
            "device": settings.device,
            "profile": settings.profile,
            "dry_run": report.dry_run,
            "real_run": report.real_run,
            "real_weights": report.real_run is not None,
            "real_weights_reason": report.real_weights_reason,
        }
        return StageOutcome(
            status=report.status,
            summary=report.summary,
            result=result,
            diagnosis=report.diagnosis,
            fix_applied="; ".join(fixes) or None,
        )

    def gate(self, ctx: StageContext) -> GateResult:
        try:
            settings = HealingSettings.from_sources(ctx.settings)
        except ValueError as exc:
            return GateResult(False, str(exc))
        passed, summary, report = healing_gate(ctx.adaptation_dir, ctx.model.adaptation_name,
                                               settings.device, settings.demo_timeout_s)
        return GateResult(passed, summary, report)


HEALING_STAGE = HealingStage()
