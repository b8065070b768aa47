"""A training job's `hf:` dataset, loaded with the `datasets` library and cached into the package.

Framework side (the `datasets` extra), at stage time: the split is written to train/data/ as JSONL
(only the columns the corpus reader uses) next to a `.source.json` record (the reference, the
requested revision, the Hub commit the files resolved to, datasets' fingerprint of the split, the
row count and the file's sha256). A
later attempt or the gate reads the cached file and never reaches the Hub again, so the run is
reproducible offline; pin the data with `@REVISION` to make a fresh package load the same rows. An
unknown dataset, revision or split is a CorpusError (one line, not retried: waiting will not create it).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from ab_runtime.fileops import sha256_file, write_text_atomic
from ab_runtime.train.corpus import CorpusError, HubDataset

COLUMNS = ("text", "messages", "source", "target")  # what ab_runtime.train.corpus reads from a record
SOURCE_SUFFIX = ".source.json"


def source_record(corpus: Path) -> Path:
    return corpus.with_name(corpus.name + SOURCE_SUFFIX)


def _commit(data_files: Any) -> str | None:
    """The Hub commit the data files were resolved at (`hf://datasets/ORG/NAME@SHA/...`); None for a local directory."""
    for files in (data_files or {}).values():
        for name in files:
            found = re.search(r"@([0-9a-f]{40})/", str(name))
            if found:
                return found.group(1)
    return None


def cache_dataset(reference: str, hub: HubDataset, data_dir: Path) -> Path:
    """The cached corpus file of `hub` in data_dir: reused when its record names the same reference
    and its bytes are the recorded ones; loaded with `datasets` and written otherwise."""
    corpus = Path(data_dir) / hub.file_name()
    record = source_record(corpus)
    if corpus.is_file() and record.is_file():
        recorded = json.loads(record.read_text())
        if recorded.get("reference") == reference and recorded.get("sha256") == sha256_file(corpus):
            return corpus
    try:
        import datasets
        from datasets.exceptions import DatasetNotFoundError
    except ImportError:
        raise CorpusError(
            f"{reference}: loading a dataset needs the datasets library (uv sync --extra datasets)"
        ) from None
    try:
        builder = datasets.load_dataset_builder(hub.name, revision=hub.revision)  # load_dataset's own three steps
    except DatasetNotFoundError as exc:  # an OSError to Python, but no retry brings it back
        raise CorpusError(f"{reference}: {exc}") from None
    builder.download_and_prepare()
    try:
        data = builder.as_dataset(split=hub.split)
    except ValueError as exc:  # an unknown split: datasets names the ones there are
        raise CorpusError(f"{reference}: {exc}") from None
    kept = [c for c in COLUMNS if c in data.column_names]
    if not kept:
        raise CorpusError(
            f"{reference}: the split has none of the columns {', '.join(COLUMNS)} "
            f"(columns: {', '.join(data.column_names[:8])})"
        )
    rows: list[dict[str, Any]] = data.select_columns(kept).to_list()
    if not rows:
        raise CorpusError(f"{reference}: the split {hub.split} has no rows")
    corpus.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomic(corpus, "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows))
    write_text_atomic(
        record,
        json.dumps(
            {
                "reference": reference,
                "name": hub.name,
                "split": hub.split,
                "revision": hub.revision,
                "commit": _commit(builder.config.data_files),
                "fingerprint": data._fingerprint,
                "rows": len(rows),
                "columns": kept,
                "sha256": sha256_file(corpus),
                "datasets_version": datasets.__version__,
            },
            indent=1,
            sort_keys=True,
        )
        + "\n",
    )
    return corpus
