"""uv_env's pure parts: RESULT parsing, device -> profile, the environment handed to uv."""

from __future__ import annotations

from pathlib import Path

import pytest

from ascendbridge.package.uv_env import parse_result, profile_for_device, sync, uv_environment


def test_parse_result_takes_the_last_marker_line() -> None:
    output = 'noise\nASCENDBRIDGE_RESULT {"ok": false}\nmore\nASCENDBRIDGE_RESULT {"ok": true, "device_used": "cpu"}\n'
    assert parse_result(output) == {"ok": True, "device_used": "cpu"}
    assert parse_result("no marker here\n") is None
    assert parse_result("ASCENDBRIDGE_RESULT {broken\n") is None
    assert parse_result("ASCENDBRIDGE_RESULT [1, 2]\n") is None


def test_devices_map_to_profiles() -> None:
    assert [profile_for_device(d) for d in ("npu", "cuda", "cpu")] == ["ascend", "cuda", "cpu"]
    with pytest.raises(ValueError, match="unknown device 'tpu'"):
        profile_for_device("tpu")


def test_uv_never_sees_the_framework_venv(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VIRTUAL_ENV", "/work/main/.venv")
    monkeypatch.setenv("UV_PROJECT_ENVIRONMENT", "/elsewhere")
    env = uv_environment({"DRY_RUN": "1"})
    assert "VIRTUAL_ENV" not in env and "UV_PROJECT_ENVIRONMENT" not in env and env["DRY_RUN"] == "1"


def test_sync_refuses_unknown_profiles_and_missing_projects(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="unknown profile 'tpu'"):
        sync(tmp_path, "tpu")
    with pytest.raises(FileNotFoundError, match="no pyproject.toml"):
        sync(tmp_path, "cpu")
