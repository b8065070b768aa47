"""A local model registered on a real board, with its adaptation spec, its discovered record and its
stage context: the setup every stage test that runs a stage on a tiny model starts from; and the
pieces of the tiny config.json files those tests write."""

from __future__ import annotations

import io
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from ascendbridge.board import BoardStore
from ascendbridge.board.records import ModelRecord, Registration, TaskRecord
from ascendbridge.config import adaptations_dir
from ascendbridge.discovery.model_info import ModelInfo
from ascendbridge.package.spec import AdaptationSpec, ModelSource
from ascendbridge.stage_api import StageContext
from discovery.stage import model_fields

if TYPE_CHECKING:  # only a test passes its monkeypatch; the benches run without pytest
    import pytest

# the transformer body of the tiny configs written as config.json (hidden 32, two layers of two heads)
TINY_LAYERS = {"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2, "intermediate_size": 64}
TINY_IMAGE = {"image_size": 32, "patch_size": 8, "num_channels": 3}  # a ViT's 4 x 4 patches of RGB
TINY_GPT2_LAYERS = {"n_embd": 32, "n_layer": 2, "n_head": 2, "vocab_size": 128, "n_positions": 64}  # GPT-2's names
TINY_BERT_CONFIG = {
    "architectures": ["BertModel"],
    "model_type": "bert",
    **TINY_LAYERS,
    "vocab_size": 128,
    "max_position_embeddings": 64,
    "type_vocab_size": 2,
}


def register_local(
    board: BoardStore,
    model_id: str,
    model_dir: Path,
    stage: str,
    task_family: str,
    model_class: str,
    model_type: str,
    **spec_fields: Any,
) -> tuple[ModelRecord, TaskRecord, Path, AdaptationSpec]:
    """Register `model_dir` as `model_id`: (its record, its task of `stage`, its adaptation directory,
    a spec of the local model without weights, plus `spec_fields`). Nothing is rendered yet."""
    ((record, _),) = board.register_models([Registration(model_id=model_id, source="local", path=str(model_dir))])
    task = board.list_tasks(stage=stage, model_id=record.model_id)[0]
    spec = AdaptationSpec(
        name=record.adaptation_name,
        model=ModelSource(model_id=record.model_id, source="local", path=str(model_dir), has_weights=False),
        task_family=task_family,
        model_class=model_class,
        model_type=model_type,
        **spec_fields,
    )
    return record, task, adaptations_dir() / record.adaptation_name, spec


def put_discovered(board: BoardStore, info: ModelInfo, allow_remote_code: bool = False) -> ModelRecord:
    """Register `info`'s model and write what discovery found on it, the columns and metadata the
    Discovery stage leaves on the board: the record the later stages start from."""
    registration = Registration(
        model_id=info.model_id, source=info.source, path=info.local_dir, allow_remote_code=allow_remote_code
    )
    board.register_models([registration])
    return board.update_model_metadata(info.model_id, model_fields(info), info.model_dump(mode="json"))


def local_context(
    record: ModelRecord, task: TaskRecord, directory: Path, board_path: Path, log: TextIO | None = None, **settings: Any
) -> StageContext:
    """The context a stage runs `task` of `record` in, with `settings`; it logs to `log` (a string
    buffer unless given)."""
    buffer = io.StringIO() if log is None else log
    return StageContext(
        model=record, task=task, adaptation_dir=directory, board_path=board_path, log=buffer, settings=settings
    )


def stage_context(board: BoardStore, model_id: str, stage: str, **settings: Any) -> StageContext:
    """The context the team lead hands a stage for the model's task of that stage (on the CPU
    unless `settings` say otherwise)."""
    model = board.get_model(model_id)
    task = board.list_tasks(stage=stage, model_id=model_id)[0]
    directory = adaptations_dir() / model.adaptation_name
    return local_context(model, task, directory, board.path, **{"device": "cpu", **settings})


def fresh_board(env: pytest.MonkeyPatch, root: Path) -> BoardStore:
    """A new board under `root`, with the board, log and adaptation paths of ASCENDBRIDGE_* pointed
    there so that nothing touches the repository (the board_path fixture, for wider scopes)."""
    for key, value in (
        ("ASCENDBRIDGE_BOARD", root / "board.db"),
        ("ASCENDBRIDGE_LOGS", root / "logs"),
        ("ASCENDBRIDGE_ADAPTATIONS", root / "adaptations"),
    ):
        env.setenv(key, str(value))
    (root / "adaptations").mkdir()
    return BoardStore.init(root / "board.db")
