"""Contracts between the runtime and the framework, checked without torch."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from ascendbridge.package.spec import RESULT_MARKER
from tests.runtime.rt_support import RUNTIME_PARENT


def test_result_marker_is_the_framework_marker() -> None:
    """One definition, in the runtime every adaptation ships (ab_runtime/result.py); the framework's
    name for it is that same string."""
    tree = ast.parse((RUNTIME_PARENT / "ab_runtime" / "result.py").read_text())
    values = {
        n.targets[0].id: ast.literal_eval(n.value)
        for n in tree.body
        if isinstance(n, ast.Assign) and isinstance(n.targets[0], ast.Name) and isinstance(n.value, ast.Constant)
    }
    assert values["RESULT_MARKER"] == RESULT_MARKER


def test_runtime_never_imports_the_framework() -> None:
    for path in (RUNTIME_PARENT / "ab_runtime").rglob("*.py"):  # subpackages too (business/)
        for node in ast.walk(ast.parse(path.read_text())):
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else ([node.module or ""] if isinstance(node, ast.ImportFrom) and node.level == 0 else [])
            )
            assert not any(n.split(".")[0] in ("ascendbridge", "adaptation", "pydantic") for n in names), (path, names)


def test_spec_errors_need_no_torch(tmp_path: Path) -> None:
    """A bad spec is reported before torch is imported: fast, and works in a broken env."""
    code = (
        "import sys; sys.path.insert(0, sys.argv[1]); from ab_runtime.demo import main; "
        "rc = main(['--spec', sys.argv[2]]); assert 'torch' not in sys.modules; raise SystemExit(rc)"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code, str(RUNTIME_PARENT), str(tmp_path / "missing.json")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 1
    assert proc.stderr.strip() == f"error: spec file not found: {tmp_path / 'missing.json'}"
    assert proc.stdout.strip().splitlines()[-1].startswith(RESULT_MARKER)


@pytest.mark.parametrize(("flag", "value"), [("--text", ""), ("--image", ""), ("--audio", "  ")])
def test_an_input_given_empty_is_refused_not_replaced_by_the_default(flag: str, value: str) -> None:
    """`demo.py --text "$UNSET"` must not answer for the default text as if it were the user's."""
    code = (
        "import sys; sys.path.insert(0, sys.argv[1]); from ab_runtime.demo import main; "
        "rc = main(sys.argv[2:]); assert 'torch' not in sys.modules; raise SystemExit(rc)"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code, str(RUNTIME_PARENT), flag, value], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 1
    assert proc.stderr.strip() == f"error: bad arguments: argument {flag}: expected a non-empty value, got {value!r}"
    assert proc.stdout.strip().splitlines()[-1].startswith(RESULT_MARKER)


def test_healer_device_fix_reaches_the_runtime_spec() -> None:
    """The healer's device_mismatch fix sets spec.set_default_device; the runtime must read it."""
    code = (
        "import sys, json; sys.path.insert(0, sys.argv[1]); from ab_runtime.spec import parse_spec; "
        "base = {'task_family': 'causal_lm', 'model_class': 'GPT2LMHeadModel', 'model': {'model_id': 'a/b'}}; "
        "print(json.dumps([parse_spec(base).set_default_device, "
        "parse_spec({**base, 'set_default_device': True}).set_default_device]))"
    )
    proc = subprocess.run([sys.executable, "-c", code, str(RUNTIME_PARENT)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[false, true]"
