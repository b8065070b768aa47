"""The one atomic write (ab_runtime/fileops.py): whole file or old file, unique temporaries, synced."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from ab_runtime import fileops


def test_a_write_replaces_the_file_whole_and_leaves_nothing_beside_it(tmp_path: Path) -> None:
    target = tmp_path / "notes.json"
    target.write_text("old")
    plain = tmp_path / "plain"
    plain.write_text("x")
    fileops.write_text_atomic(target, "new")
    assert target.read_text() == "new" and sorted(p.name for p in tmp_path.iterdir()) == ["notes.json", "plain"]
    assert stat.S_IMODE(target.stat().st_mode) == stat.S_IMODE(plain.stat().st_mode)  # the umask's mode, not 0600
    fileops.write_bytes_atomic(tmp_path / "fresh.bin", b"\x00\x01")
    assert (tmp_path / "fresh.bin").read_bytes() == b"\x00\x01"


def test_a_failed_write_keeps_the_old_file(tmp_path: Path) -> None:
    target = tmp_path / "metrics.json"
    target.write_text("old")
    with pytest.raises(RuntimeError), fileops.atomic_path(target) as tmp:
        tmp.write_text("half")
        raise RuntimeError("the writer died")
    assert target.read_text() == "old" and [p.name for p in tmp_path.iterdir()] == ["metrics.json"]


def test_two_writers_of_one_path_never_share_a_temporary(tmp_path: Path) -> None:
    target = tmp_path / "history.json"
    with fileops.atomic_path(target) as first:
        first.write_text("first")
        fileops.write_text_atomic(target, "second")  # finishes while the first is still writing
        assert first.read_text() == "first" and target.read_text() == "second"
    assert target.read_text() == "first"  # the later rename wins, whole


def test_the_file_and_its_directory_are_synced_before_the_write_counts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    synced: list[str] = []
    real_fsync = os.fsync

    def recording_fsync(fd: int) -> None:  # a spy: a crash is the only other witness of an fsync
        synced.append("dir" if stat.S_ISDIR(os.fstat(fd).st_mode) else "file")
        real_fsync(fd)

    monkeypatch.setattr(fileops.os, "fsync", recording_fsync)
    fileops.write_text_atomic(tmp_path / "a.json", "{}")
    assert synced == ["file", "dir"]
