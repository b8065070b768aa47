"""Reading checker reports and marked result lines (ascendbridge.gatekit.checker)."""

from __future__ import annotations

import json
import sys

from ascendbridge.gatekit.checker import json_report, marked_json, run_checker

MARK = "ASCENDBRIDGE_RESULT "


def test_marked_json_takes_the_last_marked_line() -> None:
    out = f"noise\n{MARK}{json.dumps({'ok': False})}\nmore\n{MARK}{json.dumps({'ok': True})}\ntrailer\n"
    assert marked_json(out, MARK) == {"ok": True}


def test_marked_json_rejects_broken_or_non_object_payloads() -> None:
    assert marked_json(f"{MARK}{{not json\n", MARK) is None
    assert marked_json(f"{MARK}[1, 2]\n", MARK) is None
    assert marked_json("nothing marked here\n", MARK) is None


def test_json_report_reads_a_last_line_or_a_pretty_object() -> None:
    assert json_report('PASS files\n{"passed": true, "checks": []}\n') == {"passed": True, "checks": []}
    pretty = "progress line\n" + json.dumps({"passed": False, "summary": "x"}, indent=2) + "\n"
    assert json_report(pretty) == {"passed": False, "summary": "x"}
    assert json_report("no report at all\n") is None
    assert json_report('{"truncated": \n') is None


def test_run_checker_runs_a_real_process_and_parses_its_report() -> None:
    code = "import json; print('checking'); print(json.dumps({'passed': True, 'summary': 'ok'}))"
    report, res = run_checker([sys.executable, "-c", code], timeout_s=60)
    assert res.exit_code == 0 and report == {"passed": True, "summary": "ok"}
    report, res = run_checker([sys.executable, "-c", "import sys; print('crash'); sys.exit(3)"], timeout_s=60)
    assert res.exit_code == 3 and report is None
