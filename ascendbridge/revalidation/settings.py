"""Re-validation settings (a kernel section of ascendbridge.settings): `--set revalidation.KEY`,
then ASCENDBRIDGE_REVALIDATION_*, then defaults."""

from __future__ import annotations

from pydantic_settings import SettingsConfigDict

from ascendbridge.settings import StageSettings


class RevalidationSettings(StageSettings):
    model_config = SettingsConfigDict(env_prefix="ASCENDBRIDGE_REVALIDATION_")
    key_prefix = "revalidation_"
    label = "revalidation"

    optimize: bool = (
        False  # the re-validation stage (run_completed_adaptations.py --optimize) re-runs the optimization too
    )
