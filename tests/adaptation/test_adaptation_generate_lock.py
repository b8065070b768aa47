"""generate(): `uv lock` runs only when pyproject.toml changed, and a failed lock leaves no stale uv.lock."""

from __future__ import annotations

from pathlib import Path

import pytest

from ascendbridge.package.generator import generate
from ascendbridge.package.uv_env import lock
from tests.adaptation.helpers import tiny_bert_dir, tiny_bert_spec


@pytest.mark.slow  # real `uv lock` runs of a generated package
def test_lock_follows_pyproject_and_a_failed_lock_is_not_left_behind(tmp_path: Path) -> None:
    spec = tiny_bert_spec(tiny_bert_dir(tmp_path))
    target = tmp_path / "adaptations" / spec.name
    first = generate(spec, target)
    assert first.ok and first.lock is not None and target / "uv.lock" in first.changed
    assert lock(target, check=True).ok
    locked = (target / "uv.lock").read_text()
    # the ascend pairing resolves: torch 2.7.1 with torch-npu 2.7.1.post2; cpu takes the local wheel
    assert 'name = "torch-npu"\nversion = "2.7.1.post2"' in locked
    assert 'version = "2.13.0+cpu"' in locked

    spec.inputs.batch_size = 3  # spec-only change: no new lock
    second = generate(spec, target)
    assert second.lock is None and [p.name for p in second.changed] == ["README.md", "adaptation.json"]

    spec.dependencies["numpy"] = "==0.0.1"  # unresolvable
    broken = generate(spec, target)
    assert not broken.ok and "numpy" in broken.lock.output
    assert not (target / "uv.lock").exists() and target / "uv.lock" in broken.changed

    del spec.dependencies["numpy"]
    healed = generate(spec, target)
    assert healed.ok and (target / "uv.lock").is_file() and lock(target, check=True).ok
