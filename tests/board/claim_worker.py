"""A worker process for the claim-race test: claims and completes tasks until none are left.

Run as `python claim_worker.py BOARD OWNER GO_FILE OUT_FILE`. It waits for GO_FILE so that all
workers start claiming at the same moment, then writes the task ids it claimed and any errors.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO_ROOT))

from ascendbridge.board import BoardStore  # noqa: E402


def main() -> int:
    board, owner, go_file, out_file = sys.argv[1:5]
    store = BoardStore(board)
    deadline = time.monotonic() + 60
    while not Path(go_file).exists() and time.monotonic() < deadline:
        time.sleep(0.005)
    claimed: list[int] = []
    errors: list[str] = []
    idle_polls = 0
    while idle_polls < 3:  # a few empty polls: another worker may be about to unlock a stage
        try:
            task = store.claim_next(owner=owner, lease_s=120)
            if task is None:
                idle_polls += 1
                time.sleep(0.05)
                continue
            idle_polls = 0
            claimed.append(task.id)
            store.complete_task(task.id, task.fencing_token, {"by": owner})
        except Exception as exc:  # recorded, not raised: the test asserts there are none
            errors.append(f"{type(exc).__name__}: {exc}")
            if len(errors) > 20:
                break
    store.close()
    Path(out_file).write_text(json.dumps({"claimed": claimed, "errors": errors}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
