"""Model registration: checking a registration, registering models (all or nothing) and
reading or updating a model's record."""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from sqlalchemy import insert
from sqlmodel import col, select

from ab_runtime.train.corpus import FORMATS, CorpusError, hub_dataset, load_documents
from ascendbridge.board.base import InvalidRegistrationError, StoreBase, _chunks
from ascendbridge.board.connection import BoardError
from ascendbridge.board.records import ModelRecord, Registration, TrainingJob, dumps, loads, now_iso
from ascendbridge.board.schema import Event, Model, RegisteredColumns, Task
from ascendbridge.naming import base_adaptation_name, hashed_adaptation_name, validate_model_id
from ascendbridge.stages import OPTIONAL_STAGES, STAGES, TRAINING_JOB_STAGES, check_stage

SOURCES = ("huggingface", "local", "hf-cache")

_REVISION_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._/-]{0,127}$")
MAX_PRIORITY = 1_000_000_000  # well inside SQLite's 64-bit integers
MAX_TRAIN_STEPS = 1_000_000
MAX_TRAIN_PROCESSES = 64  # torchrun processes of one job: the devices it claims at once
# A local corpus up to this size is read at registration, as the harness reads it, so a file it cannot
# read is refused there and then, not minutes later by the training stage; a larger one, or Parquet
# (whose reader may live only in the package's environment), is left to the stage's own refusal.
CORPUS_READ_AT_REGISTRATION = 64 * 1024 * 1024


def validate_registration(reg: Registration) -> None:
    """Check one registration before it touches the board; the CLI, the dashboard and
    register_models share it so every entry point refuses the same things."""
    try:
        validate_model_id(reg.model_id)
        for stage in (*reg.skip_stages, *reg.enable_stages):
            check_stage(stage)
    except ValueError as exc:
        raise InvalidRegistrationError(str(exc)) from exc
    if not_optional := sorted(set(reg.enable_stages) - OPTIONAL_STAGES):
        raise InvalidRegistrationError(
            f"model '{reg.model_id}': {', '.join(not_optional)} always run (only opt-in stages are enabled: "
            f"{', '.join(sorted(OPTIONAL_STAGES)) or 'none'})"
        )
    if reg.source not in SOURCES:
        raise InvalidRegistrationError(f"unknown source '{reg.source}' (expected one of: {', '.join(SOURCES)})")
    if reg.source == "local" and not reg.path:
        raise InvalidRegistrationError(f"model '{reg.model_id}': source 'local' needs --path")
    if reg.revision is not None and (not _REVISION_RE.match(reg.revision) or ".." in reg.revision):
        raise InvalidRegistrationError(
            f"model '{reg.model_id}': revision '{reg.revision}' is not a branch, tag or commit name"
        )
    if reg.url is not None and not re.match(r"^https?://[^\s'\"`$;|&<>]+$", reg.url):
        raise InvalidRegistrationError(f"model '{reg.model_id}': url must be a plain http(s):// address")
    if len(reg.description) > 2000:
        raise InvalidRegistrationError(f"model '{reg.model_id}': description longer than 2000 characters")
    if abs(reg.priority) > MAX_PRIORITY:
        raise InvalidRegistrationError(
            f"model '{reg.model_id}': priority {reg.priority} is out of range (-{MAX_PRIORITY}..{MAX_PRIORITY})"
        )
    if reg.proxy_depth is not None and reg.proxy_depth < 1:
        raise InvalidRegistrationError(
            f"model '{reg.model_id}': depth {reg.proxy_depth} is not a layer count (a proxy builds 1 layer or more)"
        )
    if reg.training is not None:
        _validate_training(reg.model_id, reg.training)


def _validate_training(model_id: str, job: TrainingJob) -> None:
    """The corpus is an absolute path to a readable file of a format the harness reads, or a well-formed
    `hf:` dataset reference (loaded by the training stage, where the Hub is reachable); the steps in range."""
    try:
        hub = hub_dataset(job.data)
    except CorpusError as exc:
        raise InvalidRegistrationError(f"model '{model_id}': training data {exc}") from None
    data = Path(job.data)
    if hub is not None:
        if hub.name.startswith("/") and not Path(hub.name).is_dir():
            raise InvalidRegistrationError(
                f"model '{model_id}': training data '{job.data}': {hub.name} is not a directory"
            )
    elif not data.is_absolute():
        raise InvalidRegistrationError(f"model '{model_id}': training data '{job.data}' is not an absolute path")
    elif data.suffix.lower() not in FORMATS:
        raise InvalidRegistrationError(
            f"model '{model_id}': training data '{job.data}' is not a corpus file "
            f"(expected one of: {', '.join(sorted(FORMATS))})"
        )
    elif not data.is_file() or data.stat().st_size == 0:
        raise InvalidRegistrationError(f"model '{model_id}': training data '{job.data}' is not a non-empty file")
    elif FORMATS[data.suffix.lower()] != "parquet" and data.stat().st_size <= CORPUS_READ_AT_REGISTRATION:
        try:
            load_documents(data)
        except (CorpusError, UnicodeDecodeError) as exc:
            raise InvalidRegistrationError(f"model '{model_id}': training data {exc}") from None
    if not 2 <= job.steps <= MAX_TRAIN_STEPS:  # 2: the gate re-runs a logged step from a checkpoint before the last
        raise InvalidRegistrationError(
            f"model '{model_id}': training steps {job.steps} out of range (2..{MAX_TRAIN_STEPS})"
        )
    if not 1 <= job.processes <= MAX_TRAIN_PROCESSES:
        raise InvalidRegistrationError(
            f"model '{model_id}': training processes {job.processes} out of range (1..{MAX_TRAIN_PROCESSES})"
        )


class RegistryStore(StoreBase):
    """Register models and read or update their records."""

    def register_models(
        self, registrations: Iterable[Registration], origin: str = "cli"
    ) -> list[tuple[ModelRecord, bool]]:
        """Register all or nothing. Returns (record, created) pairs; existing ids are reported."""
        regs = list(registrations)
        for reg in regs:
            validate_registration(reg)
        with self._write() as s:
            ids = [r.model_id for r in regs]
            existing = {
                m.model_id: m
                for chunk in _chunks(ids, 500)
                for m in s.exec(select(Model).where(col(Model.model_id).in_(chunk))).all()
            }
            taken = set(s.exec(select(Model.adaptation_name)).all())
            now = now_iso()
            seen: dict[str, dict[str, Any]] = {}  # new model_id -> its column values
            for reg in regs:
                if reg.model_id in existing or reg.model_id in seen:
                    continue
                name = base_adaptation_name(reg.model_id)
                if name in taken:
                    name = hashed_adaptation_name(reg.model_id)
                    if name in taken:
                        raise BoardError(f"adaptation name collision for '{reg.model_id}'")
                taken.add(name)
                # no training job: the stages that need one are skipped by policy (nothing to run)
                opted_out = OPTIONAL_STAGES - set(reg.enable_stages)
                skip = sorted(set(reg.skip_stages) | opted_out | (set() if reg.training else TRAINING_JOB_STAGES))
                seen[reg.model_id] = {
                    **reg.model_dump(include=set(RegisteredColumns.model_fields)),
                    "adaptation_name": name,
                    "skip_stages_json": dumps(skip),
                    "paused": False,
                    "env_mode": "",
                    "env_python": None,
                    "metadata_json": "{}",
                    "training_json": dumps(reg.training.model_dump() if reg.training else {}),
                    "created_at": now,
                }
            if seen:
                # Core bulk inserts: building ORM objects cost ~1 ms per model, too slow for
                # registering thousands at once (bench/board_bench.py).
                s.execute(insert(Model), list(seen.values()))
                new_ids = list(seen)
                for chunk in _chunks(new_ids, 500):
                    for pk, model_id in s.exec(
                        select(Model.id, Model.model_id).where(col(Model.model_id).in_(chunk))
                    ).all():
                        seen[model_id]["id"] = pk
                task_rows = []
                event_rows = []
                for row in seen.values():
                    for i, stage in enumerate(STAGES):
                        task_rows.append(
                            {
                                "model_pk": row["id"],
                                "stage": stage,
                                "stage_order": i,
                                "status": "pending" if i == 0 else "waiting",
                                "attempts": 0,
                                "fencing_token": 0,
                                "updated_at": now,
                            }
                        )
                    event_rows.append(
                        {
                            "model_pk": row["id"],
                            "stage": None,
                            "kind": "registered",
                            "message": f"registered {row['model_id']} as {row['adaptation_name']}",
                            "data_json": dumps(
                                {
                                    "source": row["source"],
                                    "priority": row["priority"],
                                    "training": loads(row["training_json"], {}) or None,
                                    "proxy_depth": row["proxy_depth"],
                                }
                            ),
                            "origin": origin,
                            "ts": now,
                        }
                    )
                s.execute(insert(Task), task_rows)
                s.execute(insert(Event), event_rows)
            records = {mid: ModelRecord.of(row) for mid, row in existing.items()}
            records.update((mid, _new_model_record(row)) for mid, row in seen.items())
        # One pair per request, in the caller's order; an id listed twice is created only once.
        results: list[tuple[ModelRecord, bool]] = []
        reported: set[str] = set()
        for reg in regs:
            created = reg.model_id in seen and reg.model_id not in reported
            reported.add(reg.model_id)
            results.append((records[reg.model_id], created))
        return results

    def get_model(self, model_id: str) -> ModelRecord:
        with self._read() as s:
            return ModelRecord.of(self._model_row(s, model_id))

    def list_models(self) -> list[ModelRecord]:
        with self._read() as s:
            rows = s.exec(select(Model).order_by(col(Model.priority).desc(), col(Model.id))).all()
            return [ModelRecord.of(r) for r in rows]

    def update_model_metadata(
        self, model_id: str, fields: dict[str, Any], metadata: dict[str, Any], origin: str = "cli"
    ) -> ModelRecord:
        """Set metadata columns outside any stage (imports, tools, tests). A stage's metadata
        reaches the board only with its gated completion (complete_task)."""
        with self._write() as s:
            row = self._model_row(s, model_id)
            self._set_metadata(s, row, fields, metadata, origin)
            return ModelRecord.of(row)


def _new_model_record(row: dict[str, Any]) -> ModelRecord:
    """The record of a just-inserted model straight from its column values (no ORM object)."""
    fields = {k: v for k, v in row.items() if k not in ("id", "skip_stages_json", "metadata_json", "training_json")}
    return ModelRecord(
        pk=row["id"],
        skip_stages=loads(row["skip_stages_json"], []),
        metadata={},
        training=loads(row["training_json"], {}) or None,
        **fields,
    )
