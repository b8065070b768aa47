"""The bundled evaluation sets: where they live, their data cards, and the digest check.

A set is `data/<name>.jsonl` (one JSON object per line, each with an `id`) plus its data card
`data/<name>.card.json` (what it is, licence, size, how it was made, sha256 of the file). Seeded
synthetic inputs (images, audio features) are sets too, without a file: their card is built here.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ab_runtime.fileops import sha256_file

DATA_DIR = Path(__file__).resolve().parent / "data"
SYNTHETIC_SETS: dict[str, dict[str, Any]] = {
    "seeded-images": {
        "kind": "image_classification",
        "items": 16,
        "description": "Seeded random pixel tensors at the model's image size (no gold labels).",
    },
    "seeded-audio": {
        "kind": "speech_seq2seq",
        "items": 8,
        "description": "Seeded random log-mel features at the model's feature size (no gold text).",
    },
    "seeded-inputs": {
        "kind": "outputs_agreement",
        "items": 4,
        "description": "Seeded inputs from the task family's own input builder (images through the "
        "image processor, audio, series, text); no gold: target vs reference "
        "agreement of the family's accuracy outputs only.",
    },
}


class DatasetError(ValueError):
    """A set that is unknown, unreadable, or does not match its data card."""


@dataclass(frozen=True)
class DataCard:
    name: str
    kind: str
    description: str
    licence: str
    items: int
    how_made: str
    sha256: str | None  # None for seeded synthetic sets (nothing on disk to digest)
    file: str | None
    language: str = "en"

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def load_card(name: str, data_dir: Path = DATA_DIR) -> DataCard:
    if name in SYNTHETIC_SETS:
        info = SYNTHETIC_SETS[name]
        return DataCard(
            name,
            info["kind"],
            info["description"],
            "n/a (generated at run time)",
            info["items"],
            "torch.Generator seeded with the spec's seed + item index",
            None,
            None,
            "n/a",
        )
    path = Path(data_dir) / f"{name}.card.json"
    try:
        raw = json.loads(path.read_text())
        return DataCard(**{k: raw.get(k) for k in DataCard.__dataclass_fields__ if k in raw})
    except FileNotFoundError:
        raise DatasetError(
            f"unknown evaluation set '{name}' (no data card {path.name}; known: {', '.join(list_sets(data_dir))})"
        ) from None
    except (OSError, json.JSONDecodeError, TypeError) as exc:
        raise DatasetError(f"data card {path} is unreadable: {exc}") from None


def list_sets(data_dir: Path = DATA_DIR) -> list[str]:
    return sorted(p.name[: -len(".card.json")] for p in Path(data_dir).glob("*.card.json")) + sorted(SYNTHETIC_SETS)


def verify_file(card: DataCard, path: Path) -> str | None:
    """None when `path` is the file the card describes (sha256), else why not (one line)."""
    if card.sha256 is None:
        return None
    if not Path(path).is_file():
        return f"{card.name}: data file {path} is missing"
    actual = sha256_file(path)
    if actual != card.sha256:
        return f"{card.name}: {Path(path).name} sha256 {actual[:12]}... does not match its data card ({card.sha256[:12]}...)"
    return None


def load_items(card: DataCard, data_dir: Path = DATA_DIR) -> list[dict[str, Any]]:
    """The set's items after checking the file against its card."""
    if card.file is None:
        return [{"id": f"{card.name}-{i:03d}"} for i in range(card.items)]
    path = Path(data_dir) / card.file
    problem = verify_file(card, path)
    if problem:
        raise DatasetError(problem)
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
