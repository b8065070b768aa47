"""Progress on long work (ab_runtime/progress.py): `step i/n, elapsed, rate` lines, rate-limited to
the first, the last and one every few seconds, and the heartbeat file a running attempt leaves
for the team lead and the dashboard."""

from __future__ import annotations

import io
import json
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ab_runtime.progress import PREFIX, PROGRESS_FILE_ENV, Progress, fmt_s, rate, read_heartbeat

REPO = Path(__file__).resolve().parents[2]


def lines(out: io.StringIO) -> list[str]:
    return out.getvalue().splitlines()


def test_a_fast_phase_prints_its_first_and_last_line_only_and_a_nested_one_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A tiny model's thousand quick steps: two lines, however many steps, and none for a phase
    inside it that ends within the interval."""
    beat = tmp_path / "attempt-1.progress.json"
    monkeypatch.setenv(PROGRESS_FILE_ENV, str(beat))
    out, inner = io.StringIO(), io.StringIO()
    with Progress("timed calls", total=1000, unit="call", out=out) as progress:
        for _ in range(1000):
            with Progress("first call", out=inner):
                pass
            progress.advance()
    first, last = lines(out)
    assert first == PREFIX + "timed calls: call 0/1000, started"
    assert re.fullmatch(re.escape(PREFIX) + r"timed calls: call 1000/1000, elapsed 0s, [\d.]+ call/s, done", last), last
    assert inner.getvalue() == ""
    heartbeat = read_heartbeat(beat)
    assert heartbeat is not None and PREFIX + heartbeat.line == last and abs(heartbeat.at - time.time()) < 60


def test_slow_steps_print_a_line_each_interval_with_the_rate_and_a_failure_says_stopped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    beat = tmp_path / "beat.json"
    monkeypatch.setenv(PROGRESS_FILE_ENV, str(beat))
    out = io.StringIO()
    with pytest.raises(RuntimeError), Progress("baseline contract (reference)", total=4, every_s=0.0, out=out) as p:
        p.advance(note="loss 3.2100")
        p.advance(note="loss 3.1000")
        raise RuntimeError("out of memory")
    got = lines(out)
    assert got[0] == PREFIX + "baseline contract (reference): step 0/4, started"
    assert re.fullmatch(
        re.escape(PREFIX) + r"baseline contract \(reference\): step 1/4, elapsed 0s, [\d.]+ step/s \(loss 3.2100\)",
        got[1],
    )
    assert got[2].startswith(PREFIX + "baseline contract (reference): step 2/4, elapsed 0s, ")
    assert got[3].endswith(", stopped (RuntimeError) (loss 3.1000)") and len(got) == 4
    heartbeat = read_heartbeat(beat)
    assert heartbeat is not None and "stopped (RuntimeError)" in heartbeat.line


def test_rates_and_durations_read_for_people() -> None:
    assert [fmt_s(4.2), fmt_s(247), fmt_s(3900), fmt_s(None)] == ["4s", "4m07s", "1h05m", "?"]
    assert rate(2, 842.0, "step") == "7m01s/step"  # the 70-minute contract's steps
    assert rate(40, 4.0, "sample") == "10.0 sample/s"
    assert rate(0, 5.0, "step") == ""  # nothing done yet: no rate


def test_waiting_work_prints_its_elapsed_time_and_note_not_a_count() -> None:
    """An engine start is waited on, not counted: its lines say how long and what the server says."""
    out = io.StringIO()
    with Progress("engine start", unit="", every_s=0.0, out=out) as progress:
        progress.advance(0, note="server log: loading weights")
    assert lines(out) == [
        PREFIX + "engine start: started",
        PREFIX + "engine start: elapsed 0s (server log: loading weights)",
        PREFIX + "engine start: elapsed 0s, done (server log: loading weights)",
    ]


def test_a_loop_left_by_an_error_ends_as_stopped_before_the_error_is_reported() -> None:
    """The phase ends with its `with` block, not when the loop's iterator is collected: its last
    line comes before the run's one-line error (which must stay the last line of stderr)."""
    out = io.StringIO()
    with pytest.raises(MemoryError), Progress("batch sweep", total=3, unit="batch", out=out) as progress:
        for batch in progress.over([1, 8, 32]):
            if batch == 8:
                raise MemoryError("out of memory at batch 8")
        out.write("error: never reached\n")
    out.write("error: out of memory at batch 8\n")
    got = lines(out)
    assert got[0] == PREFIX + "batch sweep: batch 0/3, started"
    assert re.fullmatch(
        re.escape(PREFIX) + r"batch sweep: batch 1/3, elapsed 0s, [\d.]+ batch/s, stopped \(MemoryError\)", got[1]
    )
    assert got[2:] == ["error: out of memory at batch 8"]


def test_a_missing_or_torn_heartbeat_reads_as_none(tmp_path: Path) -> None:
    assert read_heartbeat(tmp_path / "absent.json") is None
    (tmp_path / "torn.json").write_text('{"line": "step 1/4"')
    assert read_heartbeat(tmp_path / "torn.json") is None


def test_a_process_reports_to_the_file_its_environment_names_and_only_rank_0_reports(tmp_path: Path) -> None:
    """A real process, as a model run: its lines on stderr (stdout stays for the RESULT line), its
    heartbeat in the file; a torchrun follower (RANK 1) adds nothing."""
    code = (
        "from ab_runtime.progress import Progress\n"
        "with Progress('held-out evaluation', total=3, unit='batch') as progress:\n"
        "    for _ in progress.over(range(3)):\n"
        "        pass\n"
        "print('RESULT-LIKE LINE')\n"
    )
    for rank in ("0", "1"):
        beat = tmp_path / f"rank{rank}.progress.json"
        env = {"PATH": "/usr/bin:/bin", PROGRESS_FILE_ENV: str(beat), "RANK": rank, "PYTHONPATH": str(REPO)}
        proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout == "RESULT-LIKE LINE\n"
        if rank == "1":
            assert proc.stderr == "" and not beat.exists()
            continue
        assert proc.stderr.splitlines()[0] == PREFIX + "held-out evaluation: batch 0/3, started"
        assert proc.stderr.splitlines()[-1].endswith(", done")
        assert json.loads(beat.read_text())["line"] == proc.stderr.splitlines()[-1].removeprefix(PREFIX)
