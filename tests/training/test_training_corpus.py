"""Corpus reading, shape detection, packing and the data order (standard library: no torch)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from ab_runtime.train import corpus
from ab_runtime.train.corpus import CorpusError, Document, Position


def test_every_format_and_record_shape_is_read(tmp_path: Path) -> None:
    (tmp_path / "a.jsonl").write_text(
        '{"text": "hello"}\n\n{"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]}\n'
    )
    (tmp_path / "b.json").write_text(json.dumps([{"source": "s", "target": "t"}, "plain"]))
    (tmp_path / "c.csv").write_text("text\nfirst row\nsecond row\n")
    (tmp_path / "d.txt").write_text("para one\nline two\n\n\npara two\n")
    assert corpus.load_documents(tmp_path / "a.jsonl") == [Document("hello"), Document("user: hi\nassistant: yo")]
    assert corpus.load_documents(tmp_path / "b.json") == [Document("s", "t"), Document("plain")]
    assert corpus.load_documents(tmp_path / "c.csv") == [Document("first row"), Document("second row")]
    assert corpus.load_documents(tmp_path / "d.txt") == [Document("para one\nline two"), Document("para two")]


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        ("x.jsonl", '{"title": "no text"}\n', "needs 'text', 'messages'"),
        ("x.jsonl", "{not json\n", "x.jsonl:1: not JSON"),
        ("x.json", '{"text": "a"}', "a list of records"),
        ("x.xml", "<a/>", "unknown corpus format"),
        ("x.jsonl", "\n", "no records"),
    ],
)
def test_a_bad_corpus_is_one_line_naming_the_file(tmp_path: Path, name: str, content: str, message: str) -> None:
    (tmp_path / name).write_text(content)
    with pytest.raises(CorpusError, match=re.escape(message)):
        corpus.load_documents(tmp_path / name)


def test_packing_joins_documents_with_eos_and_drops_the_short_tail() -> None:
    blocks = corpus.pack([[5, 6, 7], [8, 9], [10]], seq_len=3, eos_id=2)
    assert blocks == [[5, 6, 7], [2, 8, 9], [2, 10, 2]]
    assert corpus.pack([[5, 6, 7, 8]], seq_len=3, eos_id=2) == [[5, 6, 7]]


def test_the_data_order_records_the_epoch_and_is_fixed_by_the_seed() -> None:
    position, seen = Position(0, 0), []
    for _ in range(5):  # 10 blocks, batches of 4: two batches an epoch, the remainder of 2 skipped
        indices, position = corpus.next_batch(10, position, 4, seed=3)
        seen.append((position.epoch, indices))
    assert [epoch for epoch, _ in seen] == [0, 0, 1, 1, 2]
    assert len(set(seen[0][1] + seen[1][1])) == 8
    assert seen[0][1] != seen[2][1]  # a new permutation each epoch
    again, _ = corpus.next_batch(10, Position(1, 0), 4, seed=3)
    assert again == seen[2][1]  # a resumed position gives the same batch
    with pytest.raises(CorpusError, match="fewer than one batch"):
        corpus.next_batch(3, Position(0, 0), 4, seed=0)


def test_every_tenth_document_is_held_out() -> None:
    docs = [Document(str(i)) for i in range(25)]
    train, held = corpus.split(docs)
    assert [d.text for d in held] == ["9", "19"] and len(train) == 23
    assert corpus.split(docs[:3]) == (docs[:3], docs[:3])


def test_the_byte_tokenizer_needs_room_for_every_byte() -> None:
    assert corpus.ByteTokenizer(512).encode("A\u00e9") == [65 + 4, 0xC3 + 4, 0xA9 + 4]
    with pytest.raises(CorpusError, match="at least 260"):
        corpus.ByteTokenizer(128)


def test_the_bundled_corpus_is_its_generator_output(tmp_path: Path) -> None:
    """The committed corpus is exactly what make_corpus.py writes (the data card's claim)."""
    import runpy
    import shutil

    here = Path(__file__).resolve().parents[2] / "training" / "corpus"
    shutil.copy(here / "make_corpus.py", tmp_path / "make_corpus.py")
    runpy.run_path(str(tmp_path / "make_corpus.py"), run_name="__main__")
    assert (tmp_path / "tiny_stories.jsonl").read_bytes() == (here / "tiny_stories.jsonl").read_bytes()


def test_parquet_is_read_where_pyarrow_is_installed(tmp_path: Path) -> None:
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"text": ["one", "two"]}), tmp_path / "c.parquet")
    assert corpus.load_documents(tmp_path / "c.parquet") == [Document("one"), Document("two")]
