"""Operator coverage on the dashboard: a model's gap list (labelled unverified until the benchmark
gate passed) and the board-wide custom-operator worklist on the reports page, from op_gaps.json."""

from __future__ import annotations

import json

import httpx

from ascendbridge.operators.table import PINNED_RELEASE
from tests.dashboard.dash_support import Site


def gap(op: str, remedy: str, share: float, module: str) -> dict:
    return {
        "op": op,
        "module": module,
        "modules": {module: 2},
        "calls": 2,
        "dtypes": ["bfloat16"],
        "cpu_share": share,
        "remedy": {"class": remedy},
    }


def write_report(site: Site, adaptation: str, gaps: list[dict]) -> None:
    directory = site.adaptations / adaptation
    directory.mkdir(exist_ok=True)
    report = {
        "release": PINNED_RELEASE,
        "ops": 27,
        "covered": {"registered": 20},
        "gaps": gaps,
        "dtype_gaps": [],
        "blocking": [g["op"] for g in gaps if g["remedy"]["class"] == "custom_op"],
    }
    (directory / "op_gaps.json").write_text(
        json.dumps({"profile": "op_profile.json", "reports": {PINNED_RELEASE: report}})
    )


def test_the_gap_list_and_the_worklist(site: Site) -> None:
    write_report(
        site,
        "acme__llama-tiny",
        [
            gap("_npu_unknown_rope", "custom_op", 0.3, "model.layers.0.self_attn"),
            gap("argmax", "cpu_fallback", 0.001, "(model)"),
        ],
    )
    write_report(site, "other-model", [gap("_npu_unknown_rope", "custom_op", 0.2, "encoder.rope")])
    page = httpx.get(f"{site.url}/models/acme/llama-tiny", timeout=10).text
    section = page[page.index('id="op-coverage"') : page.index('id="business"')]
    assert "_npu_unknown_rope" in section and "model.layers.0.self_attn" in section and "cpu_fallback" in section
    assert 'id="op-gaps-unverified"' in section  # its benchmark gate has not passed on this board
    api = httpx.get(f"{site.url}/api/models/acme/llama-tiny", timeout=10).json()
    assert [g["op"] for g in api["op_gaps"]["reports"][PINNED_RELEASE]["gaps"]] == ["_npu_unknown_rope", "argmax"]
    rows = httpx.get(f"{site.url}/api/reports", timeout=10).json()["op_worklist"]["rows"]
    assert [(r["op"], r["models"]) for r in rows] == [
        ("_npu_unknown_rope", ["acme__llama-tiny", "other-model"]),
        ("argmax", ["acme__llama-tiny"]),
    ]
    reports = httpx.get(f"{site.url}/reports", timeout=10).text
    assert "Custom-operator worklist" in reports and "2 (acme__llama-tiny, other-model)" in reports
    bert = httpx.get(f"{site.url}/models/acme/bert-mini", timeout=10).text
    assert "No operator report yet" in bert
