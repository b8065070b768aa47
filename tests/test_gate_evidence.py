"""A gate reads a stage's evidence only once the code that wrote it is the framework's
(ascendbridge/gatekit/evidence.py `trusted_evidence`), and says in one line why not."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from ascendbridge.config import RUNTIME_DIR, RUNTIME_NAME
from ascendbridge.gatekit.evidence import trusted_evidence
from ascendbridge.gatekit.report import untrusted_summary

FILE, SCHEMA = "serve/acceptance.json", "ascendbridge.serving/1"


def test_the_code_first_then_the_evidence_file_with_its_schema(tmp_path: Path) -> None:
    directory = tmp_path / "x"
    directory.mkdir()
    evidence, why, code = trusted_evidence(directory, FILE, SCHEMA, "serving")
    assert (
        evidence is None and code and code[0].startswith(f"{RUNTIME_NAME}/ missing") and why == untrusted_summary(code)
    )
    shutil.copytree(RUNTIME_DIR, directory / RUNTIME_NAME, ignore=shutil.ignore_patterns("__pycache__"))
    (directory / RUNTIME_NAME / "figures.py").write_text("# edited\n")
    evidence, why, code = trusted_evidence(directory, FILE, SCHEMA, "serving")
    assert evidence is None and why.startswith(f"code not as generated: {RUNTIME_NAME}/figures.py differs")
    shutil.copyfile(RUNTIME_DIR / "figures.py", directory / RUNTIME_NAME / "figures.py")
    assert trusted_evidence(directory, FILE, SCHEMA, "serving")[1].startswith("no readable serving evidence: ")
    (directory / "serve").mkdir()
    (directory / FILE).write_text(json.dumps({"schema": "other/1"}))
    assert trusted_evidence(directory, FILE, SCHEMA, "serving") == (
        None,
        f"{FILE}: not serving evidence (schema != {SCHEMA})",
        [],
    )
    (directory / FILE).write_text(json.dumps({"schema": SCHEMA, "figures": {}}))
    assert trusted_evidence(directory, FILE, SCHEMA, "serving") == ({"schema": SCHEMA, "figures": {}}, "", [])
