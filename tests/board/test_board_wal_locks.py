"""Regression: opening a second store in a process must not break SQLite's locks.

Closing any descriptor of the database file drops every POSIX lock the process holds on it. The
board once read the file header (and probed writability) with open()/close() on every open; a
process holding a store that opened another one lost its locks, the next process to close its
connection believed it was the last, checkpointed and deleted the WAL under the others, and they
failed with "disk I/O error" or read a stale board (tasks back to token 0).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from ascendbridge.board import BoardStore, Registration

WRITER = """
import sys
from ascendbridge.board import BoardStore
store = BoardStore(sys.argv[1])
task = store.claim_next("other-process", 60)
store.complete_task(task.id, task.fencing_token, {"by": "other"})
store.close()
"""


def test_second_store_in_a_process_keeps_the_wal_alive(board_path: Path) -> None:
    first = BoardStore.init(board_path)
    first.register_models([Registration(model_id="org/a"), Registration(model_id="org/b")])
    assert first.list_models()  # the first store now holds a live connection with its locks
    BoardStore(board_path).close()  # what the team lead, workers and hooks do all the time

    subprocess.run(
        [sys.executable, "-c", WRITER, str(board_path)],
        check=True,
        timeout=120,
        cwd=Path(__file__).resolve().parents[2],
    )

    assert Path(f"{board_path}-wal").exists(), "the WAL was deleted while a connection was open"
    done = first.list_tasks(stage="discovery", status="completed")
    assert [t.result for t in done] == [{"by": "other"}]
    claimed = first.claim_next("first-process", 60)  # still writable, no disk I/O error
    assert claimed is not None and claimed.fencing_token == 1
    first.close()
