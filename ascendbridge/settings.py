"""One typed settings mechanism for every stage and the agents (pydantic-settings).

Precedence is the same everywhere: the team lead's `--set STAGE.KEY=VALUE` (it arrives as
StageContext.settings), then the environment variable ASCENDBRIDGE_<KEY>, then the default. A key
is the setting's full name (`benchmark_iters`, `healing_max_attempts`, `device`): a class with
`key_prefix = "benchmark_"` names its field `iters` and reads `benchmark_iters` /
ASCENDBRIDGE_BENCHMARK_ITERS. Every setting is listed in docs/teamlead.md ("Stage settings").
"""

from __future__ import annotations

from typing import Any, ClassVar, Mapping, Optional, TypeVar

from pydantic import Field, ValidationError
from pydantic_settings import BaseSettings, SettingsConfigDict

ENV_PREFIX = "ASCENDBRIDGE_"
S = TypeVar("S", bound="StageSettings")


class StageSettings(BaseSettings):
    """Base of every settings class; subclasses set `key_prefix` and their env_prefix to match."""

    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, extra="ignore", frozen=True, populate_by_name=True,
                                      env_ignore_empty=True)  # VAR= means "not set"
    key_prefix: ClassVar[str] = ""
    label: ClassVar[str] = ""  # names these settings in errors; default: key_prefix ("benchmark")

    @classmethod
    def shown(cls, key: str) -> str:
        """How an error names a key: the key itself (a class whose keys also have flags adds them)."""
        return key

    @classmethod
    def env_names(cls) -> dict[str, str]:
        """Field name -> its environment variable (the alias where a field has one)."""
        prefix = str(cls.model_config.get("env_prefix", ENV_PREFIX))
        return {name: (str(info.validation_alias) if isinstance(info.validation_alias, str) else prefix + name).upper()
                for name, info in cls.model_fields.items()}

    @classmethod
    def keys(cls) -> dict[str, str]:
        """Full setting key (`--set STAGE.KEY`, e.g. benchmark_iters) -> field name."""
        return {env[len(ENV_PREFIX):].lower(): name for name, env in cls.env_names().items()}

    @classmethod
    def from_sources(cls: type[S], settings: Optional[Mapping[str, Any]] = None) -> S:
        """The run's settings (full keys), then the environment, then defaults; ValueError in one line.

        Keys this class does not define are ignored: one StageContext.settings serves several classes.
        """
        keys = cls.keys()
        given = {keys[k]: v for k, v in (settings or {}).items() if k in keys and v is not None}
        try:
            return cls(**given)
        except ValidationError as exc:
            first = exc.errors()[0]
            what = cls.label or cls.key_prefix.rstrip("_") or "stage"
            loc = [str(p) for p in first.get("loc", ())]
            name = next((k for k, f in keys.items() if loc and f == loc[0]), ".".join(loc))
            message = str(first.get("msg", "")).removeprefix("Value error, ")
            raise ValueError(f"bad {what} setting {cls.shown(name)}: {message}" if name
                             else f"bad {what} setting: {message}") from None


def setting_keys(cls: type[StageSettings]) -> list[tuple[str, str, Any]]:
    """(key, environment variable, default) of every field: what docs/teamlead.md lists."""
    env = cls.env_names()
    return [(key, env[name], cls.model_fields[name].default) for key, name in cls.keys().items()]


class DeviceSettings(StageSettings):
    """What discovery sizes models against. `device_pool` is set by the team lead for its jobs (JSON:
    one entry per host, {"host", "kind", "count", "memory_gb"}); `device_memory_gb` overrides every
    host's per-device memory, and is the one device assumed when there is no pool (discovery run
    by hand; a CPU-only host, whose "device" is its RAM budget)."""

    label = "device"
    DEFAULT_MEMORY_GB: ClassVar[float] = 64.0

    device_memory_gb: Optional[float] = Field(None, gt=0)
    device_pool: Optional[str] = None

    def memory_gb(self) -> float:
        return self.device_memory_gb if self.device_memory_gb is not None else self.DEFAULT_MEMORY_GB
