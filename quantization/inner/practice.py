"""Runs in the tool environment (PyYAML comes with msModelSlim; the framework has none): a copy of
msModelSlim's shipped default practice with `spec.dataset` set to the calibration file.

    python practice.py PRACTICE_ID CALIBRATION_JSONL OUT_YAML

Prints one line `PRACTICE={"id", "source", "tool_version"}`.
"""

import json
import sys
from importlib.metadata import version
from pathlib import Path

import msmodelslim
import yaml

practice_id, calibration, out = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3])
source = Path(msmodelslim.__file__).parent / "lab_practice" / "default" / f"{practice_id}.yaml"
practice = yaml.safe_load(source.read_text())
if practice["metadata"]["config_id"] != practice_id:
    raise SystemExit(f"{source}: config_id {practice['metadata']['config_id']}, expected {practice_id}")
practice["spec"]["dataset"] = str(calibration.resolve())
out.write_text(yaml.safe_dump(practice, sort_keys=False))
print("PRACTICE=" + json.dumps({"id": practice_id, "source": source.name, "tool_version": version("msmodelslim")}))
