"""Rendering: the package's files, pyproject extras/conflicts/torch sources, reproducibility."""

from __future__ import annotations

from pathlib import Path

import pytest
import tomllib

from ascendbridge.config import TorchProfile, TorchSource
from ascendbridge.package.generator import (
    NO_RESULTS,
    RUNTIME_DIR,
    GeneratorError,
    project_dependencies,
    render_adaptation,
    update_readme_results,
)
from ascendbridge.package.spec import AdaptationSpec, AppliedFix
from tests.adaptation.helpers import tiny_bert_dir, tiny_bert_spec

CPU_INDEX = "https://download.pytorch.org/whl/cpu"


def torch_source(wheel_dir: str | None) -> TorchSource:
    return TorchSource(
        profiles={
            "cpu": TorchProfile("cpu", ("torch==2.13.0",), None if wheel_dir else CPU_INDEX),
            "cuda": TorchProfile("cuda", ("torch==2.9.1",)),
            "ascend": TorchProfile("ascend", ("torch==2.7.1", "torch-npu==2.7.1.post2")),
        },
        wheel_dir=wheel_dir,
    )


@pytest.fixture()
def wheel_dir(tmp_path: Path) -> Path:
    """A local wheel directory like /opt/wheels (only the file name matters for rendering)."""
    d = tmp_path / "wheels"
    d.mkdir()
    (d / "torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl").write_bytes(b"")
    return d


@pytest.fixture()
def spec(tmp_path: Path) -> AdaptationSpec:
    return tiny_bert_spec(tiny_bert_dir(tmp_path))


def snapshot(directory: Path) -> dict[str, tuple[bytes, int]]:
    return {
        str(p.relative_to(directory)): (p.read_bytes(), p.stat().st_mtime_ns)
        for p in sorted(directory.rglob("*"))
        if p.is_file()
    }


def test_renders_every_file_of_the_package(tmp_path: Path, spec: AdaptationSpec, wheel_dir: Path) -> None:
    target = tmp_path / "adaptations" / "tiny-bert"
    changed = render_adaptation(spec, target, torch_source(str(wheel_dir)))
    for name in (
        "pyproject.toml",
        "README.md",
        "demo.py",
        "adaptation.json",
        ".gitignore",
        ".python-version",
        "ab_runtime/__init__.py",
    ):
        assert (target / name).is_file(), name
        assert target / name in changed
    assert AdaptationSpec.load(target) == spec
    runtime = sorted(p.relative_to(RUNTIME_DIR) for p in RUNTIME_DIR.rglob("*.py") if "__pycache__" not in p.parts)
    for rel in runtime:
        assert (target / "ab_runtime" / rel).read_bytes() == (RUNTIME_DIR / rel).read_bytes()
    readme = (target / "README.md").read_text()
    assert "uv sync --extra cpu" in readme and "uv run demo.py --dry-run" in readme
    assert NO_RESULTS in readme
    demo = (target / "demo.py").read_text()
    assert "from ab_runtime.demo import main" in demo and "demo/tiny-bert" in demo
    assert 'uv run demo.py --text "..."' in demo and "--image" not in demo  # the input this family takes


@pytest.mark.parametrize(
    "family,usage",
    [
        ("image_text_to_text", 'uv run demo.py --image PATH --text "..."'),
        ("zero_shot_image_classification", 'uv run demo.py --image PATH --labels "a cat,a dog"'),
        ("ctc_speech_recognition", "uv run demo.py --audio WAV"),
    ],
)
def test_demo_usage_names_the_input_the_family_takes(
    family: str, usage: str, tmp_path: Path, spec: AdaptationSpec, wheel_dir: Path
) -> None:
    spec.task_family = family
    render_adaptation(spec, tmp_path / spec.name, torch_source(str(wheel_dir)))
    demo = (tmp_path / spec.name / "demo.py").read_text()
    assert usage in demo and '--text "..."   # your text' not in demo


def test_pyproject_declares_conflicting_extras_and_local_wheels(
    tmp_path: Path, spec: AdaptationSpec, wheel_dir: Path
) -> None:
    spec.dependencies = {"sentencepiece": ">=0.2"}
    target = tmp_path / "tiny-bert"
    render_adaptation(spec, target, torch_source(str(wheel_dir)))
    data = tomllib.loads((target / "pyproject.toml").read_text())
    extras = data["project"]["optional-dependencies"]
    assert extras == {
        "ascend": ["torch==2.7.1", "torch-npu==2.7.1.post2"],
        "cuda": ["torch==2.9.1"],
        "cpu": ["torch==2.13.0"],
    }
    assert data["project"]["name"] == "ab-tiny-bert"
    deps = data["project"]["dependencies"]
    assert deps[0] == "transformers>=4.46" and "sentencepiece>=0.2" in deps and "huggingface_hub>=0.26" in deps
    assert "peft>=0.18" in deps  # LoRA training in every package
    assert not any(d.startswith("accelerate") for d in deps)  # one device: no device_map, no accelerate
    spec.device_plan = {"devices": 2, "strategy": "device_map", "per_device_gb": 64}
    assert "accelerate>=1.0" in project_dependencies(spec)  # a sharded model loads through accelerate
    uv = data["tool"]["uv"]
    assert uv["conflicts"] == [[{"extra": "ascend"}, {"extra": "cuda"}, {"extra": "cpu"}]]
    assert uv["find-links"] == [str(wheel_dir)]
    assert "sources" not in uv and "index" not in uv
    assert (target / ".python-version").read_text() == "3.11\n"


def test_without_wheel_dir_torch_comes_from_the_cpu_index(tmp_path: Path, spec: AdaptationSpec) -> None:
    target = tmp_path / "tiny-bert"
    render_adaptation(spec, target, torch_source(None))
    uv = tomllib.loads((target / "pyproject.toml").read_text())["tool"]["uv"]
    assert "find-links" not in uv
    assert uv["index"] == [{"name": "pytorch-cpu", "url": CPU_INDEX, "explicit": True}]
    assert uv["sources"]["torch"] == [
        {"index": "pytorch-cpu", "extra": "cpu"},
        # PyPI's x86_64 torch is a CUDA build, which torch_npu refuses to load next to.
        {"index": "pytorch-cpu", "extra": "ascend", "marker": "platform_machine == 'x86_64'"},
    ]
    assert not (target / ".python-version").exists()


def test_switching_torch_source_rewrites_only_what_depends_on_it(
    tmp_path: Path, spec: AdaptationSpec, wheel_dir: Path
) -> None:
    target = tmp_path / "tiny-bert"
    render_adaptation(spec, target, torch_source(str(wheel_dir)))
    changed = render_adaptation(spec, target, torch_source(None))
    assert sorted(p.name for p in changed) == [".python-version", "pyproject.toml"]
    assert not (target / ".python-version").exists()


def test_rerendering_an_unchanged_spec_changes_nothing(tmp_path: Path, spec: AdaptationSpec, wheel_dir: Path) -> None:
    target = tmp_path / "tiny-bert"
    source = torch_source(str(wheel_dir))
    render_adaptation(spec, target, source)
    before = snapshot(target)
    assert render_adaptation(AdaptationSpec.load(target), target, source) == []
    assert snapshot(target) == before  # bytes and mtimes


def test_a_spec_edit_rerenders_only_the_affected_files(tmp_path: Path, spec: AdaptationSpec, wheel_dir: Path) -> None:
    target = tmp_path / "tiny-bert"
    source = torch_source(str(wheel_dir))
    render_adaptation(spec, target, source)
    spec.applied_fixes.append(AppliedFix(rule="missing_module", description="added sentencepiece", attempt=1))
    spec.dependencies["sentencepiece"] = ">=0.2"
    changed = render_adaptation(spec, target, source)
    assert sorted(p.name for p in changed) == ["README.md", "adaptation.json", "pyproject.toml"]
    assert "`missing_module` (attempt 1): added sentencepiece" in (target / "README.md").read_text()


def test_measured_results_survive_a_rerender(tmp_path: Path, spec: AdaptationSpec, wheel_dir: Path) -> None:
    target = tmp_path / "tiny-bert"
    source = torch_source(str(wheel_dir))
    render_adaptation(spec, target, source)
    assert update_readme_results(target, "| device | latency |\n|---|---|\n| cpu | 1.0 ms |")
    assert not update_readme_results(target, "| device | latency |\n|---|---|\n| cpu | 1.0 ms |")
    spec.inputs.batch_size = 4
    render_adaptation(spec, target, source)
    readme = (target / "README.md").read_text()
    assert "| cpu | 1.0 ms |" in readme and NO_RESULTS not in readme and "batch 4" in readme


def test_runtime_copy_drops_files_the_runtime_no_longer_has(
    tmp_path: Path, spec: AdaptationSpec, wheel_dir: Path
) -> None:
    target = tmp_path / "tiny-bert"
    render_adaptation(spec, target, torch_source(str(wheel_dir)))
    stale = target / "ab_runtime" / "old_module.py"
    stale.write_text("x = 1\n")
    (target / "ab_runtime" / "device.py").write_text("tampered\n")
    changed = render_adaptation(spec, target, torch_source(str(wheel_dir)))
    assert sorted(p.name for p in changed) == ["device.py", "old_module.py"]
    assert not stale.exists()
    assert (target / "ab_runtime" / "device.py").read_bytes() == (RUNTIME_DIR / "device.py").read_bytes()


@pytest.mark.parametrize(
    "mutate, message",
    [
        (lambda s: s.dependencies.update({"numpy": "; import os"}), "invalid requirement"),
        (lambda s: s.dependencies.update({"numpy": " torch>=2"}), "invalid requirement"),
        (lambda s: setattr(s, "transformers_requirement", "transformers>=4\nx"), "invalid requirement"),
        (lambda s: setattr(s, "name", "../escape"), "not a safe directory name"),
        (lambda s: setattr(s, "name", "other-name"), "but the directory is"),
    ],
)
def test_bad_specs_are_refused_before_anything_is_written(
    tmp_path: Path, spec: AdaptationSpec, wheel_dir: Path, mutate, message: str
) -> None:
    mutate(spec)
    target = tmp_path / "tiny-bert"
    with pytest.raises(GeneratorError, match=message):
        render_adaptation(spec, target, torch_source(str(wheel_dir)))
    assert not target.exists()


def test_generated_files_carry_no_secrets(
    tmp_path: Path, spec: AdaptationSpec, wheel_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HF_TOKEN", "hf_secretvalue123")
    target = tmp_path / "tiny-bert"
    render_adaptation(spec, target, torch_source(str(wheel_dir)))
    for path in target.rglob("*"):
        if path.is_file():
            assert b"hf_secretvalue123" not in path.read_bytes(), path
