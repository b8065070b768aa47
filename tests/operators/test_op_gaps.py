"""A model's recorded operators against a release's table: the gap report (module path, remedy,
operator spec), its check in the benchmark gate, and the comparison of two releases."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from ascendbridge.config import REPO_ROOT
from ascendbridge.operators import gaps
from ascendbridge.operators import table as op_table
from bench.support.tiny_adaptations import make_adaptation
from bench.support.torch_env import torch_env_python
from benchmark import op_coverage

SCRIPT = REPO_ROOT / "scripts" / "op_coverage.py"


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    """tiny-gpt2 (bfloat16, generation) recorded once by the runtime's recorder, as the stage runs it."""
    directory = make_adaptation(tmp_path_factory.mktemp("ops"), "tiny-gpt2")
    proc = subprocess.run(
        [str(torch_env_python()), "-m", "ab_runtime.ops.record", "--out", op_coverage.PROFILE],
        cwd=directory,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return directory, json.loads((directory / op_coverage.PROFILE).read_text())


def with_shares(profile: dict[str, Any], **shares: float) -> dict[str, Any]:
    """The profile with these ops' CPU shares set: a share is measured, and differs between
    machines (tiny-gpt2's attention took 1.4 % on one, over 2 % on another), so a test that needs
    one remedy class or the other fixes it."""
    ops = {op: {**record, "cpu_share": shares.get(op, record["cpu_share"])} for op, record in profile["ops"].items()}
    return {**profile, "ops": ops}


def without(table: op_table.OpTable, *ops: str) -> op_table.OpTable:
    return dataclasses.replace(table, release="test", ops={o: w for o, w in table.ops.items() if o not in ops})


def test_the_profile_is_what_the_npu_would_see(recorded: tuple[Path, dict[str, Any]]) -> None:
    _, profile = recorded
    ops = profile["ops"]
    assert profile["phases"] == ["forward", "generation"] and profile["dtype"] == "bfloat16"
    sdpa = ops["scaled_dot_product_attention"]  # the CPU flash kernel named as the op torch_npu registers
    assert sdpa["cpu_kernels"] == ["_scaled_dot_product_flash_attention_for_cpu"]
    assert not any(name.endswith("_for_cpu") or name == "_fused_sdp_choice" for name in ops)
    assert "transformer.h.0.ln_1" in ops["native_layer_norm"]["modules"] and "bfloat16" in ops["addmm"]["dtypes"]
    assert ops["argmax"]["phases"] == ["generation"]
    assert abs(sum(o["cpu_share"] for o in ops.values()) - 1.0) < 1e-3


def test_a_missing_op_is_a_gap_with_its_module_and_remedy(recorded: tuple[Path, dict[str, Any]]) -> None:
    _, profile = recorded
    pinned = op_table.load_table("2.7.1.post2")
    assert gaps.gap_report(profile, pinned)["gaps"] == []
    # native_layer_norm has an ATen composite kernel: never a gap, whatever the table says
    table = without(pinned, "scaled_dot_product_attention", "argmax", "argmax.out", "native_layer_norm")
    measured = {g["op"]: g for g in gaps.gap_report(profile, table)["gaps"]}
    assert set(measured) == {"scaled_dot_product_attention", "argmax"}
    for gap in measured.values():  # the class follows the measured share, whatever this machine measured
        heavy = gap["cpu_share"] > gaps.CPU_FALLBACK_MAX_SHARE
        assert gap["remedy"]["class"] == ("custom_op" if heavy else "cpu_fallback"), gap
    light = gaps.gap_report(with_shares(profile, scaled_dot_product_attention=0.01, argmax=0.001), table)
    light_remedies = {g["op"]: g["remedy"] for g in light["gaps"]}
    assert {r["class"] for r in light_remedies.values()} == {"cpu_fallback"} and light["blocking"] == []
    assert light_remedies["scaled_dot_product_attention"]["cost"].startswith("1.00% of the recorded CPU time")
    report = gaps.gap_report(with_shares(profile, scaled_dot_product_attention=0.3, argmax=0.001), table)
    found = {g["op"]: g for g in report["gaps"]}
    attention = found["scaled_dot_product_attention"]
    assert attention["module"] in ("transformer.h.0.attn", "transformer.h.1.attn")
    assert attention["remedy"]["class"] == "custom_op"
    spec = attention["remedy"]["spec"]
    assert spec["signature"].startswith("aten::scaled_dot_product_attention(") and spec["dtypes_seen"] == ["bfloat16"]
    assert spec["shapes_seen"][0] == "[2, 2, 16, 16] x [2, 2, 16, 16] x [2, 2, 16, 16]"
    assert spec["acceptance"]["min_samples"] == 50 and "bfloat16" in spec["acceptance"]["thresholds"]
    assert found["argmax"]["remedy"]["class"] == "cpu_fallback" and found["argmax"]["module"] == "(model)"
    assert report["blocking"] == ["scaled_dot_product_attention"]


def test_a_dtype_the_table_refuses_is_reported(recorded: tuple[Path, dict[str, Any]]) -> None:
    _, profile = recorded
    table = dataclasses.replace(op_table.load_table("2.7.1.post2"), dtypes={"addmm": ["float16", "float32"]})
    report = gaps.gap_report(profile, table)
    assert [(g["op"], g["dtypes"]) for g in report["dtype_gaps"]] == [("addmm", ["bfloat16"])]


def test_two_releases_compared(recorded: tuple[Path, dict[str, Any]]) -> None:
    _, profile = recorded
    new = op_table.load_table("2.9.0")
    old = without(new, "scaled_dot_product_attention")
    assert gaps.compare(profile, old, new)["closed"] == ["scaled_dot_product_attention"]
    assert gaps.compare(profile, op_table.load_table("2.7.1.post2"), new)["closed"] == []
    newest = gaps.compare(profile, op_table.load_table("2.7.1.post2"), op_table.load_table("2.13.0"))
    assert newest["closed"] == newest["opened"] == [] and newest["new_gaps"] == 0


def test_the_gate_recomputes_the_report(recorded: tuple[Path, dict[str, Any]], tmp_path: Path) -> None:
    source, profile = recorded
    directory = tmp_path / "a"
    directory.mkdir()
    assert op_coverage.evidence_check(directory) is None  # nothing recorded: nothing claimed
    (directory / op_coverage.PROFILE).write_bytes((source / op_coverage.PROFILE).read_bytes())
    from ab_runtime.fileops import sha256_file

    saved = {
        "profile": op_coverage.PROFILE,
        "profile_sha256": sha256_file(directory / op_coverage.PROFILE),
        "reports": op_coverage.reports(profile),
    }
    (directory / op_coverage.REPORT).write_text(json.dumps(saved))
    check = op_coverage.evidence_check(directory)
    assert check is not None and check.consistent, check
    ops = saved["reports"]["2.7.1.post2"]["ops"]
    assert check.verdict == f"{ops} ops, no gaps in torch_npu 2.7.1.post2", check.verdict  # the gate summary's word
    saved["reports"]["2.7.1.post2"]["gaps"] = []
    saved["reports"]["2.9.0"]["covered"] = {}
    (directory / op_coverage.REPORT).write_text(json.dumps(saved))
    forged = op_coverage.evidence_check(directory)
    assert forged is not None and not forged.consistent and "2.9.0 report does not recompute" in forged.problems[0]
    del saved["reports"]["2.7.1.post2"]
    saved["reports"]["2.9.0"] = op_coverage.reports(profile)["2.9.0"]
    (directory / op_coverage.REPORT).write_text(json.dumps(saved))
    unpinned = op_coverage.evidence_check(directory)
    assert unpinned is not None and unpinned.problems == [
        "op_gaps.json: no report for the pinned torch_npu 2.7.1.post2"
    ]
    (directory / op_coverage.PROFILE).write_text("{}")
    changed = op_coverage.evidence_check(directory)
    assert changed is not None and "sha256 does not match" in changed.problems[0]


def test_the_worklist_ranks_the_ops_blocking_most_models(recorded: tuple[Path, dict[str, Any]], tmp_path: Path) -> None:
    profile = with_shares(recorded[1], scaled_dot_product_attention=0.3, argmax=0.001)
    pinned = op_table.load_table("2.7.1.post2")
    root = tmp_path / "adaptations"
    for name, missing in (
        ("model-a", ("argmax", "argmax.out", "scaled_dot_product_attention")),
        ("model-b", ("scaled_dot_product_attention",)),
        ("model-c", ()),
    ):
        (root / name).mkdir(parents=True)
        report = gaps.gap_report(profile, without(pinned, *missing))
        (root / name / op_coverage.REPORT).write_text(json.dumps({"reports": {"2.7.1.post2": report}}))
    env = dict(os.environ, ASCENDBRIDGE_ADAPTATIONS=str(root))

    def tool(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=120, env=env
        )

    proc = tool("worklist", "--json")
    assert proc.returncode == 0, proc.stderr
    rows = json.loads(proc.stdout)
    assert [(r["op"], r["models"], r["blocking"]) for r in rows] == [
        ("scaled_dot_product_attention", ["model-a", "model-b"], True),
        ("argmax", ["model-a"], False),
    ]
    assert rows[0]["spec"]["signature"].startswith("aten::scaled_dot_product_attention(")
    text = tool("worklist").stdout
    assert "3 model(s) with operator reports, 2 missing op(s)" in text
    missing = tool("gaps", "--adapt", "model-c")
    assert missing.returncode == 1 and missing.stderr.startswith("error: model-c: no op_profile.json")
    (root / "model-c" / op_coverage.PROFILE).write_text(json.dumps(profile))
    shown = tool("gaps", "--adapt", "model-c")
    assert shown.returncode == 0 and "\n0 gap(s), 0 dtype gap(s)\n" in shown.stdout, shown.stderr
    checked = [op for op in profile["ops"] if op.partition(".")[0] in pinned.dtype_checks]  # shown as text, no gap
    assert checked and all(f"  torch_npu checks {op} (used in " in shown.stdout for op in checked)
    compared = tool("compare", "--adapt", "model-c", "2.7.1.post2", "2.13.0")
    assert json.loads(compared.stdout)["closed"] == [] and json.loads(compared.stdout)["new"] == "2.13.0"
    unknown = tool("compare", "--adapt", "model-c", "2.7.1.post2", "0.0.1")
    assert unknown.returncode == 2 and unknown.stderr.startswith("error: no operator table for torch_npu 0.0.1")
