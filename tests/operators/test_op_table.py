"""The release's operator table: built from a wheel (a small fake one here, never downloaded),
from both the codegen YAML and the library's registrations, stored with its source and digest."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

from ascendbridge.config import REPO_ROOT
from ascendbridge.operators import table as op_table
from tests.operators.fake_wheel import RODATA, elf_with_rodata, make_wheel

SCRIPT = REPO_ROOT / "scripts" / "op_coverage.py"


def test_the_table_joins_the_yaml_and_the_library(tmp_path: Path) -> None:
    wheel = make_wheel(tmp_path)
    table = op_table.build_table(wheel, "https://example.invalid/w.whl")
    assert table.release == "9.9.9"
    assert table.ops["add.Tensor"] == ["yaml:supported", "so:NPU"]
    assert table.ops["topk"] == ["so:NPU"] and table.ops["topk.values"] == ["so:NPU"]  # absent from the YAML
    assert table.ops["sort.values"] == ["yaml:supported"] and table.ops["embedding"] == ["yaml:symint"]
    assert not table.has("nope.Tensor") and not table.has("config.json") and not table.has("npu_foo")
    assert not table.has("softmax_backward_data")
    assert table.custom == ["npu_foo"]
    assert table.source["sha256"] == hashlib.sha256(wheel.read_bytes()).hexdigest()
    assert table.counts() == {"ops": 6, "yaml": 4, "so": 3, "yaml_only": 3, "so_only": 2, "custom": 1}
    # the library's dtype-check messages that name their op first, as text; none turned into a dtype list
    assert table.dtype_checks == {
        "mm": ["mm_out is not support int8 dtype"],
        "topk": ["topk input only supported Int32, Float16, Float32, but got"],
    }
    assert table.dtypes == {}


def test_the_library_strings_come_from_rodata_only() -> None:
    library = elf_with_rodata(["wrapper_NPU__relu", "relu"])
    assert op_table.library_ops(op_table.rodata_strings(library)) == {"relu": ["so:NPU"]}
    assert op_table.library_ops(op_table.rodata_strings(elf_with_rodata(["wrapper_NPU__relu"]))) == {}
    assert op_table.library_ops(op_table.rodata_strings(elf_with_rodata(["wrapper_NPU__relu"])), ["relu"]) == {
        "relu": ["so:NPU"]
    }
    with pytest.raises(op_table.TableError, match="not an ELF64"):
        op_table.rodata_strings(b"MZ" + bytes(100))
    assert op_table.library_ops(op_table.rodata_strings(elf_with_rodata(RODATA[:1]))) == {}


def test_the_cli_stores_and_lists_a_table(tmp_path: Path) -> None:
    wheel = make_wheel(tmp_path)
    data = tmp_path / "data"
    run = subprocess.run(
        [
            sys.executable,
            str(SCRIPT),
            "--data-dir",
            str(data),
            "build-table",
            "--wheel",
            str(wheel),
            "--url",
            "https://example.invalid/w.whl",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr
    stored = json.loads((data / "torch_npu-9.9.9.json").read_text())
    assert (
        stored["source"]["url"] == "https://example.invalid/w.whl" and "libtorch_npu.so" in stored["source"]["derived"]
    )
    assert op_table.load_table("9.9.9", data).ops == op_table.build_table(wheel).ops
    assert op_table.load_table("9.9.9", data).dtype_checks == op_table.build_table(wheel).dtype_checks != {}
    listed = subprocess.run(
        [sys.executable, str(SCRIPT), "--data-dir", str(data), "tables"], capture_output=True, text=True, timeout=120
    )
    assert "torch_npu 9.9.9" in listed.stdout
    (tmp_path / "bad.whl").write_bytes(b"not a zip")
    bad = subprocess.run(
        [sys.executable, str(SCRIPT), "--data-dir", str(data), "build-table", "--wheel", str(tmp_path / "bad.whl")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert bad.returncode == 2 and bad.stderr.startswith("error: bad.whl: not a readable torch_npu wheel")


def test_the_pinned_release_is_stored_with_its_source() -> None:
    table = op_table.load_table("2.7.1.post2")
    assert table.source["sha256"] == "e3a463946b8ae13edb4a2fe035e652602c7c9eff86be8a57772d5e7f35432022"
    assert all(
        table.has(op)
        for op in (
            "topk",
            "sort",
            "searchsorted.Tensor",
            "stft",
            "upsample_bicubic2d",
            "scaled_dot_product_attention",
            "mm",
            "native_layer_norm",
        )
    )
    assert not table.has("_scaled_dot_product_flash_attention_for_cpu") and len(table.ops) > 1000
    assert table.dtype_checks["bmm"] == ["bmm is not support int8 dtype", "bmm_out is not support int8 dtype"]


def test_the_codegen_yaml_is_read_as_yaml_not_line_by_line() -> None:
    """Quoted names, flow-style items, comments after a value and a signature over two lines: lines
    a line reader does not recognise, all read; a file that is not YAML is a clear error."""
    text = (
        "backend: NPU  # the dispatch key\n"
        "supported:\n"
        '  - "add.Scalar"\n'
        "  - {func: 'div.Tensor(Tensor self, Tensor other) -> Tensor', op_api: True}\n"
        "  - func: >-\n"
        "      mul.Tensor(Tensor self,\n"
        "      Tensor other) -> Tensor\n"
        "autograd: [relu, gelu]\n"
        "custom:\n"
        "  - func: npu_bar(Tensor self) -> Tensor\n"
    )
    assert op_table.yaml_ops(text) == {
        "add.Scalar": ["supported"],
        "div.Tensor": ["supported"],
        "mul.Tensor": ["supported"],
        "relu": ["autograd"],
        "gelu": ["autograd"],
        "npu_bar": ["custom"],
    }
    with pytest.raises(op_table.TableError, match="not valid YAML"):
        op_table.yaml_ops("supported:\n  - add\n bad: [\n")
