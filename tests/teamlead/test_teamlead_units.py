"""Fast in-process tests: registry, settings, guidance directives, lock, progress table script."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ascendbridge import stage_registry as registry
from ascendbridge.board import BoardStore, Registration
from ascendbridge.teamlead.cli import EXIT_BOARD, EXIT_USAGE, main
from ascendbridge.teamlead.guidance import DirectiveError, apply_open_guidance, parse_directives
from ascendbridge.teamlead.lock import InstanceLock
from ascendbridge.teamlead.settings import (
    PROMPT_MODES,
    SettingsError,
    parse_stage_map,
    parse_stage_settings,
    stages_for,
)

REPO = Path(__file__).resolve().parents[2]


# ---------------------------------------------------------------- registry
def test_entry_points_env_and_register_stage_override_in_that_order(monkeypatch: pytest.MonkeyPatch) -> None:
    refs = registry.stage_refs({})
    assert refs["discovery"].target == "discovery.stage:DISCOVERY_STAGE"
    assert refs["discovery"].source == "entry-point"
    env = {registry.EXTRA_STAGES_ENV: "discovery=tests.teamlead.toy_stages:DISCOVERY, optimization=a.b:C"}
    refs = registry.stage_refs(env)
    assert refs["discovery"].source == "env" and refs["optimization"].target == "a.b:C"
    registry.register_stage("discovery", "tests.teamlead.toy_stages:ADAPTATION")
    try:
        refs = registry.stage_refs(env)
        assert refs["discovery"].target.endswith(":ADAPTATION")
        # Workers get every non-entry-point stage through the environment.
        assert "discovery=tests.teamlead.toy_stages:ADAPTATION" in registry.extra_stages_env(refs)
        assert "optimization=a.b:C" in registry.extra_stages_env(refs)
    finally:
        registry.unregister_stage("discovery")


@pytest.mark.parametrize("raw", ["discovery", "nosuchstage=a:b", "discovery=module_without_attr"])
def test_malformed_extra_stages_are_rejected(raw: str) -> None:
    with pytest.raises(ValueError):
        registry.parse_extra_stages(raw)


def test_loadability_is_checked_without_importing_the_stage() -> None:
    broken = registry.StageRef("adaptation", "tests.teamlead.toy_broken_stage:STAGE", "env")
    assert registry.check_loadable(broken, "adaptation") is None  # found, not executed
    assert "tests.teamlead.toy_broken_stage" not in sys.modules
    missing = registry.StageRef("benchmark", "tests.teamlead.no_such_module:STAGE", "env")
    assert "no module named" in (registry.check_loadable(missing, "benchmark") or "")
    assert "no implementation registered" in (registry.check_loadable(None, "optimization") or "")
    ok = registry.load_stage(registry.StageRef("discovery", "tests.teamlead.toy_stages:DISCOVERY", "env"))
    assert ok.name == "discovery"
    with pytest.raises(registry.StageLoadError, match="no attribute"):
        registry.load_stage(registry.StageRef("discovery", "tests.teamlead.toy_stages:NOPE", "env"))


# ---------------------------------------------------------------- settings / CLI errors
def test_prompt_modes_and_explicit_stages() -> None:
    assert stages_for(None, None) == PROMPT_MODES["all"]
    assert stages_for("adaptation", None) == ("discovery", "adaptation", "healing")
    assert stages_for("business", None) == ("business_benchmark",)
    assert stages_for("all", "healing,discovery") == ("discovery", "healing")  # pipeline order
    with pytest.raises(SettingsError, match="unknown PROMPT_MODE"):
        stages_for("everything", None)
    with pytest.raises(SettingsError, match="unknown stage"):
        stages_for(None, "discovery,typo")
    assert parse_stage_map("adaptation=1,benchmark=2", "--stage-workers", int) == {"adaptation": 1, "benchmark": 2}
    with pytest.raises(SettingsError):
        parse_stage_map("adaptation=0", "--stage-workers", int)
    assert parse_stage_settings(["benchmark.iters=20", "benchmark.device=npu", "business_benchmark.bounds=[1, 2]"]) == {
        "benchmark": {"iters": 20, "device": "npu"},
        "business_benchmark": {"bounds": [1, 2]},
    }
    with pytest.raises(SettingsError, match="STAGE.KEY=VALUE"):
        parse_stage_settings(["iterations=20"])
    with pytest.raises(SettingsError, match=r"flags \(--workers"):
        parse_stage_settings(["run.workers=3"])


@pytest.mark.parametrize(
    "argv, env, message",
    [
        (["--set", "benchmark.iterations=5"], {}, "error: unknown benchmark setting 'iterations' (known: "),
        (["--set", "benchmarks.iters=5"], {}, "error: unknown settings section 'benchmarks' (expected one of: "),
        (["--set", "benchmark.iters=0"], {}, "error: bad benchmark setting benchmark_iters: Input should be greater"),
        (
            ["--set", "healing.max_attempts=lots"],
            {},
            "error: bad healing setting healing_max_attempts: Input should be",
        ),
        (["--set", "paths.board=/x"], {}, "error: --set: 'paths.board=/x': paths belong to each host"),
        (
            [],
            {"ASCENDBRIDGE_BENCHMARK_ITERS": "0"},
            "error: bad benchmark setting benchmark_iters: Input should be greater",
        ),
        (
            [],
            {"ASCENDBRIDGE_HEALING_MAX_ATTEMPTS": "lots"},
            "error: bad healing setting healing_max_attempts: Input should",
        ),
        (
            [],
            {"ASCENDBRIDGE_BUSINESS_DTYPE": "float8"},
            "error: bad business setting business_dtype: bad business dtype",
        ),
        (
            [],
            {"ASCENDBRIDGE_ENV": "sideways"},
            "error: bad environment setting env: Input should be 'locked' or 'system'",
        ),
    ],
)
def test_bad_settings_are_refused_before_anything_runs(
    argv: list[str],
    env: dict[str, str],
    message: str,
    board: BoardStore,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """--set with an unknown section or key, or a bad value from --set or the environment: exit 2,
    one line, and nothing written (no board event, no claimed task, no team-lead log)."""
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    board.register_models([Registration(model_id="org/one", source="huggingface")])
    events, tasks = len(board.list_events(limit=10**6)), [(t.id, t.status, t.attempts) for t in board.list_tasks()]
    assert main(["--board", str(board.path), "--once", *argv]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert err.startswith(message) and err.count("\n") == 1, err
    assert len(board.list_events(limit=10**6)) == events
    assert [(t.id, t.status, t.attempts) for t in board.list_tasks()] == tasks and not board.list_agents()
    assert not (tmp_path / "logs" / "team-lead").exists()


@pytest.mark.parametrize(
    "argv, code, message",
    [
        (["--workers", "0"], EXIT_USAGE, "--workers"),
        (["--stages", "discovery,nope"], EXIT_USAGE, "unknown stage 'nope'"),
        (["--mode", "sideways"], EXIT_USAGE, "PROMPT_MODE"),
        (["--lease", "4", "--heartbeat", "3"], EXIT_USAGE, "half the lease"),
        (["--once", "--forever"], EXIT_USAGE, "not allowed"),
        (["--stage-timeout", "benchmark=abc"], EXIT_USAGE, "benchmark=abc"),
    ],
)
def test_bad_flags_give_one_line_and_exit_2(
    argv: list[str], code: int, message: str, board: BoardStore, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["--board", str(board.path), *argv]) == code
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and message in err and "\n" not in err


def test_missing_or_corrupt_board_is_exit_3(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--board", str(tmp_path / "none.db")]) == EXIT_BOARD
    (tmp_path / "bad.db").write_text("not sqlite")
    assert main(["--board", str(tmp_path / "bad.db")]) == EXIT_BOARD
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 2 and all(line.startswith("error: ") for line in lines)


def test_unwritable_log_folder_is_one_line(
    board: BoardStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "file").write_text("")
    monkeypatch.setenv("ASCENDBRIDGE_LOGS", str(tmp_path / "file" / "logs"))
    assert main(["--board", str(board.path)]) == EXIT_USAGE
    assert capsys.readouterr().err.strip().startswith("error: cannot write the team-lead log under ")


# ---------------------------------------------------------------- lock
def test_instance_lock_is_exclusive_and_names_the_holder(tmp_path: Path) -> None:
    board = tmp_path / "board.db"
    first = InstanceLock(board)
    first.acquire()
    holder = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; from pathlib import Path; from ascendbridge.teamlead.lock import "
            "InstanceLock, LockHeld\ntry:\n InstanceLock(Path(sys.argv[1])).acquire()\nexcept LockHeld as e:\n"
            " print(e); sys.exit(4)",
            str(board),
        ],
        capture_output=True,
        text=True,
    )
    assert holder.returncode == 4
    assert f"pid {os.getpid()}" in holder.stdout
    first.release()
    again = InstanceLock(board)
    again.acquire()  # free once released
    again.release()


# ---------------------------------------------------------------- guidance
def test_directive_grammar() -> None:
    assert [str(d) for d in parse_directives("Priority 5")] == ["priority 5"]
    assert [str(d) for d in parse_directives("retry healing; pause\nallow-remote-code")] == [
        "retry healing",
        "pause",
        "allow-remote-code",
    ]
    assert [str(d) for d in parse_directives("retry")] == ["retry"]
    assert parse_directives("please be careful with the tokenizer") is None
    assert parse_directives("priority 5; and also look at the tokenizer") is None  # never half-applied
    with pytest.raises(DirectiveError, match="unknown stage"):
        parse_directives("skip benchmarks")


def _models(board: BoardStore, *ids: str) -> None:
    board.register_models(Registration(model_id=i, source="local", path="/x") for i in ids)


def test_directives_are_applied_and_answered(board: BoardStore) -> None:
    _models(board, "org/a", "org/b")
    g = {
        "prio": board.add_guidance("priority 7", "org/a"),
        "pause": board.add_guidance("pause", "org/b"),
        "remote": board.add_guidance("allow-remote-code", "org/a"),
        "skip": board.add_guidance("skip healing", "org/b"),
        "note": board.add_guidance("the tokenizer needs use_fast=False", "org/a"),
        "bad": board.add_guidance("retry healing", "org/a"),  # healing is waiting: cannot retry
        "typo": board.add_guidance("skip heal", "org/a"),
        "all": board.add_guidance("priority 2", None),
    }
    lines: list[str] = []
    assert apply_open_guidance(board, lines.append) == len(g)
    replies = {k: next(x for x in board.list_guidance() if x.id == v.id) for k, v in g.items()}
    assert replies["prio"].state == "applied" and "priority set to 7" in replies["prio"].reply
    assert replies["pause"].state == "applied" and board.get_model("org/b").paused
    assert replies["remote"].state == "applied" and board.get_model("org/a").allow_remote_code
    assert replies["skip"].state == "applied"
    assert {t.stage: t.status for t in board.list_tasks(model_id="org/b")}["healing"] == "skipped"
    assert replies["note"].state == "answered" and replies["note"].reply.startswith("noted")
    assert replies["bad"].state == "rejected" and "cannot retry healing" in replies["bad"].reply
    assert replies["typo"].state == "rejected" and "unknown stage 'heal'" in replies["typo"].reply
    assert replies["all"].state == "applied" and "2/2 models" in replies["all"].reply
    assert [m.priority for m in board.list_models()] == [2, 2]  # applied after "priority 7", in order
    assert apply_open_guidance(board, lines.append) == 0  # nothing is applied twice
    board.add_guidance("resume", "org/b")
    apply_open_guidance(board, lines.append)
    assert not board.get_model("org/b").paused


# ---------------------------------------------------------------- progress table script
def _pt(state: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(REPO / "scripts" / "progress_table.py"), "--file", str(state), *args],
        capture_output=True,
        text=True,
    )


@pytest.mark.slow  # a dozen real progress_table.py processes
def test_progress_table_phases_percent_notes_and_totals(tmp_path: Path) -> None:
    state = tmp_path / "run.json"
    assert _pt(state, "add", "envs", "--estimate", "20m").returncode == 0
    assert _pt(state, "add", "lock", "--estimate", "1h30m").returncode == 0
    assert _pt(state, "doing", "envs", "9/24").returncode == 0
    assert _pt(state, "doing", "envs", "locking torch").returncode == 0
    assert _pt(state, "done", "lock", "--actual", "75m").returncode == 0
    assert _pt(state, "estimate", "2h").returncode == 0
    shown = _pt(state, "show", "--json")
    data = json.loads(shown.stdout)
    envs, lock = data["phases"]
    assert envs["percent"] == pytest.approx(37.5) and envs["note"] == "locking torch" and envs["status"] == "doing"
    assert lock["status"] == "done" and lock["actual_s"] == 4500
    totals = data["totals"]
    assert totals["estimate_s"] == 7200 and totals["done"] == 1
    assert totals["remaining_s"] == pytest.approx(20 * 60 * 0.625, rel=0.01)  # estimate x (1 - 37.5%)
    table = _pt(state, "show").stdout
    assert "expected finish" in table and "38% locking torch" in table
    bad = _pt(state, "doing", "nope")
    assert bad.returncode == 1 and bad.stderr.strip() == "error: no phase 'nope' (phases: envs, lock)"
    assert _pt(state, "add", "x", "--estimate", "5q").stderr.startswith("error: '5q' is not a duration")
    (tmp_path / "junk.json").write_text("{")
    assert _pt(tmp_path / "junk.json", "show").stderr.strip().endswith("invalid JSON)")


# ---------------------------------------------------------------- watchdog flags
@pytest.mark.parametrize(
    "argv, env, message",
    [
        (["--stale-after", "0"], None, "durations must be positive"),
        ([], "abc", "WATCHDOG_STALE_S='abc' is not a number"),
        (["--bogus"], None, "unrecognized arguments: --bogus"),
    ],
)
def test_watchdog_usage_errors_are_one_line(
    argv: list[str], env: str | None, message: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from ascendbridge.teamlead import watchdog

    if env is not None:
        monkeypatch.setenv("WATCHDOG_STALE_S", env)
    with pytest.raises(SystemExit) as exc:
        watchdog.parse_args(argv)
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and message in err and "\n" not in err


def test_watchdog_passes_team_lead_flags_after_double_dash(monkeypatch: pytest.MonkeyPatch) -> None:
    from ascendbridge.teamlead import watchdog

    monkeypatch.setenv("WATCHDOG_STALE_S", "30")
    args, extra = watchdog.parse_args(["--check-every", "2", "--", "--workers", "4"])
    assert args.stale_after == 30 and args.check_every == 2 and extra == ["--workers", "4"]
    argv = watchdog.Watchdog(args, extra).argv
    assert argv[1:4] == ["-m", "ascendbridge.teamlead", "--forever"] and argv[-2:] == ["--workers", "4"]
