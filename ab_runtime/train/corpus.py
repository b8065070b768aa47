"""Training corpus: read records, detect their shape, tokenize, pack into fixed-length blocks.

Standard library only (pyarrow for Parquet when it is installed), so the framework's gate reads a
corpus with the same code the run used. Formats: JSONL, JSON (a list of records), CSV (a `text`
column, or `source`/`target`), plain text (one document per blank-line-separated paragraph) and
Parquet. A record is `{"text": ...}`, chat `{"messages": [{"role", "content"}, ...]}` (rendered
`role: content` per line) or a pair `{"source", "target"}` (seq2seq).
"""

from __future__ import annotations

import csv
import hashlib
import json
import random
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

FORMATS = {".jsonl": "jsonl", ".json": "json", ".csv": "csv", ".txt": "text", ".md": "text", ".parquet": "parquet"}
HELD_OUT_EVERY = 10  # every 10th document is held out for evaluation (deterministic, order-based)
HUB_PREFIX = "hf:"  # a `datasets` reference instead of a file: hf:NAME[:SPLIT][@REVISION]
_HUB_NAME_RE = re.compile(r"^[A-Za-z0-9][\w.-]{0,95}(/[A-Za-z0-9][\w.-]{0,95})?$")
_SPLIT_RE = re.compile(r"^[A-Za-z0-9][\w.-]{0,63}$")
_REVISION_RE = re.compile(r"^[A-Za-z0-9][\w./-]{0,127}$")


class CorpusError(ValueError):
    """The corpus cannot be read or has no usable record (one line: the file and the reason)."""


@dataclass(frozen=True)
class Document:
    """One training document: text (causal / masked LM) or a source/target pair (seq2seq)."""

    text: str
    target: str | None = None


def _record(value: Any, where: str) -> Document:
    """One record in any accepted shape."""
    if isinstance(value, str):
        return Document(value)
    if not isinstance(value, dict):
        raise CorpusError(f"{where}: a record must be an object or a string, got {type(value).__name__}")
    if isinstance(value.get("text"), str):
        return Document(value["text"])
    if isinstance(value.get("messages"), list):
        lines = []
        for message in value["messages"]:
            if not isinstance(message, dict) or not isinstance(message.get("content"), str):
                raise CorpusError(f"{where}: each chat message needs a string 'content'")
            lines.append(f"{message.get('role', 'user')}: {message['content']}")
        return Document("\n".join(lines))
    if isinstance(value.get("source"), str) and isinstance(value.get("target"), str):
        return Document(value["source"], value["target"])
    raise CorpusError(f"{where}: a record needs 'text', 'messages' or 'source'+'target' (keys: {sorted(value)[:5]})")


@dataclass(frozen=True)
class HubDataset:
    """A corpus the `datasets` library loads (the framework caches it into the package as JSONL):
    a Hub dataset ORG/NAME, or an absolute local dataset directory; one split; a pinned revision or None."""

    name: str
    split: str = "train"
    revision: str | None = None

    def file_name(self) -> str:
        """The cached corpus file's name in the package's train/data/: ORG_NAME.SPLIT.jsonl, or the local
        directory's name."""
        base = Path(self.name).name if self.name.startswith("/") else self.name.replace("/", "_")
        return f"{base}.{self.split}.jsonl"


def hub_dataset(reference: str) -> HubDataset | None:
    """The HubDataset of an `hf:NAME[:SPLIT][@REVISION]` reference, None for a file path."""
    if not reference.startswith(HUB_PREFIX):
        return None
    rest, at, revision = reference[len(HUB_PREFIX) :].partition("@")
    name, colon, split = rest.partition(":")
    local = name.startswith("/")
    if not (local and ".." not in name.split("/") and Path(name).name or _HUB_NAME_RE.match(name)):
        raise CorpusError(
            f"{reference}: the dataset must be a Hub id ORG/NAME or an absolute directory (hf:NAME[:SPLIT][@REVISION])"
        )
    if colon and not _SPLIT_RE.match(split):
        raise CorpusError(f"{reference}: bad split {split!r}")
    if at and (not _REVISION_RE.match(revision) or ".." in revision):
        raise CorpusError(f"{reference}: bad revision {revision!r} (a branch, tag or commit)")
    if local and at:
        raise CorpusError(f"{reference}: a local dataset directory has no revision")
    return HubDataset(name, split or "train", revision or None)


def corpus_format(path: Path) -> str:
    fmt = FORMATS.get(path.suffix.lower())
    if fmt is None:
        raise CorpusError(
            f"{path}: unknown corpus format {path.suffix!r} (expected one of {', '.join(sorted(FORMATS))})"
        )
    return fmt


def _raw_records(path: Path, fmt: str) -> Iterable[Any]:
    if fmt == "jsonl":
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if line.strip():
                try:
                    yield json.loads(line)
                except json.JSONDecodeError as exc:
                    raise CorpusError(f"{path}:{number}: not JSON ({exc.msg})") from None
    elif fmt == "json":
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as exc:
            raise CorpusError(f"{path}: not JSON ({exc.msg})") from None
        if not isinstance(data, list):
            raise CorpusError(f"{path}: a JSON corpus is a list of records")
        yield from data
    elif fmt == "csv":
        with open(path, newline="", encoding="utf-8") as handle:
            yield from csv.DictReader(handle)
    elif fmt == "text":
        for paragraph in path.read_text(encoding="utf-8").split("\n\n"):
            if paragraph.strip():
                yield paragraph.strip()
    else:
        try:
            import pyarrow.parquet as pq  # optional: only where the package env has it
        except ImportError:
            raise CorpusError(f"{path}: reading Parquet needs pyarrow, which this environment lacks") from None
        yield from pq.read_table(path).to_pylist()


def load_documents(path: Path) -> list[Document]:
    """Every document of a corpus file, in file order."""
    path = Path(path)
    if not path.is_file():
        raise CorpusError(f"{path}: no such corpus file")
    fmt = corpus_format(path)
    documents = [_record(value, f"{path} record {index}") for index, value in enumerate(_raw_records(path, fmt))]
    if not documents:
        raise CorpusError(f"{path}: no records")
    return documents


def split(documents: Sequence[Document]) -> tuple[list[Document], list[Document]]:
    """(train, held_out): every HELD_OUT_EVERY-th document is held out; a corpus too small to
    hold one out keeps all for training and evaluates on the training documents."""
    held = [doc for index, doc in enumerate(documents) if index % HELD_OUT_EVERY == HELD_OUT_EVERY - 1]
    train = [doc for index, doc in enumerate(documents) if index % HELD_OUT_EVERY != HELD_OUT_EVERY - 1]
    return (train, held) if held else (list(documents), list(documents))


class ByteTokenizer:
    """UTF-8 bytes shifted past four special ids, for models shipped without a tokenizer (the
    demo models are config-only): needs a vocabulary of at least 260."""

    pad_id, bos_id, eos_id, mask_id = 0, 1, 2, 3
    offset = 4

    def __init__(self, vocab_size: int) -> None:
        if vocab_size < 256 + self.offset:
            raise CorpusError(
                f"the byte tokenizer needs a vocabulary of at least {256 + self.offset}, the model has {vocab_size}"
            )
        self.vocab_size = vocab_size

    def encode(self, text: str) -> list[int]:
        return [byte + self.offset for byte in text.encode("utf-8")]


def pack(sequences: Iterable[list[int]], seq_len: int, eos_id: int) -> list[list[int]]:
    """Concatenate the sequences (each ended by eos) and cut blocks of seq_len; the tail shorter
    than one block is dropped."""
    stream: list[int] = []
    for ids in sequences:
        stream.extend(ids)
        stream.append(eos_id)
    return [stream[start : start + seq_len] for start in range(0, len(stream) - seq_len + 1, seq_len)]


def epoch_order(count: int, epoch: int, seed: int) -> list[int]:
    """The block order of one epoch: a permutation fixed by (seed, epoch), the same on every rank."""
    order = list(range(count))
    random.Random(seed * 1_000_003 + epoch).shuffle(order)
    return order


@dataclass(frozen=True)
class Position:
    """Where the data stream is: the epoch and the number of blocks of it already consumed."""

    epoch: int
    offset: int


def next_batch(blocks_count: int, position: Position, batch: int, seed: int) -> tuple[list[int], Position]:
    """The block indices of the next global batch and the position after it (an epoch ends when
    fewer than `batch` blocks remain; the next batch starts the next epoch)."""
    if blocks_count < batch:
        raise CorpusError(f"the corpus packs into {blocks_count} blocks, fewer than one batch of {batch}")
    epoch, offset = position.epoch, position.offset
    if offset + batch > blocks_count:
        epoch, offset = epoch + 1, 0
    order = epoch_order(blocks_count, epoch, seed)
    return order[offset : offset + batch], Position(epoch, offset + batch)


def digest_blocks(blocks: Sequence[Sequence[int]]) -> str:
    """sha256 of the packed blocks: the record that two runs trained on the same data."""
    return hashlib.sha256(json.dumps([list(b) for b in blocks]).encode()).hexdigest()
