"""The gate kit's shared pieces, each on real input: the recorded-vs-recomputed comparison, the
RESULT wrapper of the runtime scripts, the gate report and the checker command line."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from ab_runtime.result import RESULT_MARKER, read_result, run_main
from ascendbridge.gatekit.checker import checker_gate, checker_main
from ascendbridge.gatekit.compare import RECORDED_REL_TOL, recorded_differences, recorded_matches
from ascendbridge.gatekit.report import EvidenceCheck, GateReport


def test_recorded_figures_agree_within_the_one_tolerance() -> None:
    recorded = {"median_ms": 1.0, "samples": [1.0, 2.0], "verdict": "pass", "nan": math.nan}
    assert recorded_matches(json.loads(json.dumps(recorded)) | {"nan": math.nan}, recorded)
    assert recorded_matches({"x": 1.0 + RECORDED_REL_TOL / 10}, {"x": 1.0})
    assert not recorded_matches({"x": 1.0 + RECORDED_REL_TOL * 10}, {"x": 1.0})
    assert recorded_differences({"a": {"v": "pass"}, "b": [1, 2]}, {"a": {"v": "fail"}, "b": [1, 2], "c": 0}) == [
        "a.v: recorded 'pass' != recomputed 'fail'", "c: recorded (missing) != recomputed 0"]
    assert not recorded_matches([1.0, 2.0], [1.0])  # a list of another length
    assert not recorded_matches(1.0, "1.0")  # a figure recorded as text


class BadFlag(Exception):
    pass


class Diagnosed(Exception):
    pass


def _raise(exc: Exception) -> dict:
    raise exc


@pytest.mark.parametrize(("body", "code", "error"), [
    (lambda: {"ok": True, "verdict": "pass", "error": None}, 0, None),
    (lambda: {"ok": True, "verdict": "fail", "error": None}, 2, None),
    (lambda: _raise(BadFlag("no such set\nmore detail")), 2, "no such set"),
    (lambda: _raise(Diagnosed("device gone")), 1, "device gone"),
    (lambda: 1 / 0, 1, "ZeroDivisionError: division by zero"),
])
def test_run_main_prints_the_result_line_last_whatever_happens(body, code: int, error, capsys: pytest.CaptureFixture[str]) -> None:
    got = run_main(body, lambda r: 0 if r["verdict"] == "pass" else 2, failures=(Diagnosed,), bad_input=(BadFlag,))
    out = capsys.readouterr()
    assert got == code
    assert out.out.splitlines()[-1].startswith(RESULT_MARKER)
    result = read_result(out.out)
    assert result is not None and result["error"] == error
    if isinstance(error, str) and "Error:" in error:
        assert "Traceback" in out.err  # the model code's failure keeps its traceback for the healer
    elif error:
        assert out.err.startswith(f"error: {error}") and "Traceback" not in out.err


def test_gate_report_text_json_and_exit_code() -> None:
    report = GateReport("tiny", False, "1 of 1 evidence set(s) failed")
    assert report.exit_code() == 1 and report.verdict == "failed"
    assert report.as_dict() == {"adaptation": "tiny", "passed": False, "summary": "1 of 1 evidence set(s) failed",
                                "inconclusive": False, "placement": ""}
    assert report.text().splitlines()[-1] == "FAIL: 1 of 1 evidence set(s) failed"
    placed = GateReport("tiny", True, "re-timed", placement="pinned to cores 1 as the run recorded")
    assert placed.text().splitlines() == ["placement: pinned to cores 1 as the run recorded", "PASS: re-timed"]
    undecided = GateReport("tiny", False, "re-timing too noisy here now", inconclusive=True)
    assert undecided.verdict == "inconclusive" and undecided.exit_code() == 3
    assert undecided.text() == "INCONCLUSIVE: re-timing too noisy here now"
    check = EvidenceCheck("metrics.json", False, None, ["figure does not recompute"], ["noted"])
    assert check.label is None and EvidenceCheck(**json.loads(json.dumps(check.__dict__))) == check


def test_checker_main_exit_codes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    def check(args, directory: Path) -> GateReport:
        if getattr(args, "strict", False):
            raise ValueError("--strict is not allowed here")
        return GateReport(directory.name, directory.name == "good", "checked")

    (tmp_path / "good").mkdir()
    (tmp_path / "bad").mkdir()
    assert checker_main("test", ["--adaptation-dir", str(tmp_path / "good"), "--json"], check) == 0
    assert json.loads(capsys.readouterr().out)["passed"] is True
    assert checker_main("test", ["--adaptation-dir", str(tmp_path / "bad")], check) == 1
    assert capsys.readouterr().out.strip() == "FAIL: checked"
    assert checker_main("test", ["--adaptation-dir", str(tmp_path / "missing")], check) == 2
    assert capsys.readouterr().err.strip().splitlines() == [f"error: no adaptation directory {tmp_path / 'missing'}"]
    extra = lambda p: p.add_argument("--strict", action="store_true")  # noqa: E731
    assert checker_main("test", ["--adaptation-dir", str(tmp_path / "good"), "--strict"], check, extra=extra) == 2
    assert capsys.readouterr().err.strip() == "error: --strict is not allowed here"
    with pytest.raises(SystemExit) as usage:
        checker_main("test", ["--no-such-flag"], check)
    assert usage.value.code == 2 and len(capsys.readouterr().err.strip().splitlines()) == 1


@pytest.mark.parametrize("exit_code, inconclusive, expected", [
    (0, False, (True, False)), (1, False, (False, False)), (3, True, (False, True)),
    (3, False, (False, False)),  # exit 3 without the report saying so is a failure, never a pass
    (0, True, (False, False)),  # a report that is both is not passed: exit 0 needs passed true
])
def test_checker_gate_reads_the_three_verdicts(tmp_path: Path, exit_code: int, inconclusive: bool,
                                               expected: tuple[bool, bool]) -> None:
    report = {"adaptation": "tiny", "passed": exit_code == 0 and not inconclusive, "summary": "s",
              "inconclusive": inconclusive}
    script = tmp_path / "check_tiny.py"
    script.write_text(f"import json, sys\nprint(json.dumps({report!r}))\nsys.exit({exit_code})\n")
    result = checker_gate(script, [], timeout_s=60)
    assert (result.passed, result.inconclusive) == expected
