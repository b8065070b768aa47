"""Adaptation settings (ascendbridge.settings): `--set adaptation.KEY`, then ASCENDBRIDGE_*, then defaults."""

from __future__ import annotations

from pydantic import Field

from ascendbridge.settings import StageSettings


class AdaptationSettings(StageSettings):
    label = "adaptation"

    # Bytes of weights above which the spec's dry run is reduced (spec_builder.py); None: its default.
    dry_run_max_bytes: int | None = Field(None, gt=0)
