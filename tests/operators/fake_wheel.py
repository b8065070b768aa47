"""A small torch_npu wheel for tests: the codegen YAML, a real ELF64 library whose .rodata holds
what libtorch_npu.so's registrations leave there, and version.py (never downloaded in tests)."""

from __future__ import annotations

import struct
import zipfile
from pathlib import Path


def elf_with_rodata(strings: list[str]) -> bytes:
    """A minimal ELF64 little-endian file with sections null, .shstrtab and .rodata."""
    shstrtab = b"\0.shstrtab\0.rodata\0"
    rodata = b"\0".join(s.encode() for s in strings) + b"\0"
    body = shstrtab + rodata
    shoff = 64 + len(body)
    header = (
        b"\x7fELF"
        + bytes([2, 1, 1, 0])
        + bytes(8)
        + struct.pack("<HHIQQQIHHHHHH", 3, 62, 1, 0, 0, shoff, 0, 64, 0, 0, 64, 3, 1)
    )

    def section(name: int, kind: int, offset: int, size: int) -> bytes:
        return struct.pack("<IIQQQQIIQQ", name, kind, 0, 0, offset, size, 0, 0, 1, 0)

    sections = section(0, 0, 0, 0) + section(1, 3, 64, len(shstrtab)) + section(11, 1, 64 + len(shstrtab), len(rodata))
    return header + body + sections


YAML = """backend: NPU
cpp_namespace: at_npu::native
supported:
  - add.Tensor
  - func: mm
    op_api: True
  - func: sort.values(Tensor self, int dim=-1, bool descending=False, *, Tensor(a!) values, Tensor(b!) indices) -> (Tensor(a!) values, Tensor(b!) indices)
    impl_ns: op_api
symint:
  - embedding
custom:
  - func: npu_foo(Tensor self) -> Tensor
"""

RODATA = [
    "config.json",
    "wrapper_NPU_Tensor_add",
    "add.Tensor",
    # topk: registered by the library only (its wrapper inside a mangled type name, its literal)
    "*N3c104impl6detail24WrapFunctionIntoFunctor_INS_26CompileTimeFunctionPointerIFSt5tupleIJN2at6TensorES6_EE"
    "XadL_ZNS5_12_GLOBAL__N_112_GLOBAL__N_117wrapper_NPU__topkES9_SA_lbbEEEES7_EE",
    "27wrapper_NPU_values_topk_outES9_",
    "aten::topk.values",  # the literal `topk.values`, merged into a longer string's tail
    "topk",
    "wrapper_NPU_Tensor_nope",  # a wrapper without its registration literal: not an op
    "wrapper_NPU__softmax_backward_data",  # a hand-written wrapper (of `_softmax_backward_data`): not an op
    # dtype-check messages: placed when they name their op first, else not
    "mm_out is not support int8 dtype",
    "topk input only supported Int32, Float16, Float32, but got",
    "input must be half or float",
    "add.Tensor overflow in the config",
    "npu_foo in aclop only support rotary_mode with half, but got ",
]


def make_wheel(directory: Path, version: str = "9.9.9", yaml: str = YAML, rodata: list[str] | None = None) -> Path:
    path = Path(directory) / f"torch_npu-{version}-cp311-cp311-manylinux_2_28_x86_64.whl"
    with zipfile.ZipFile(path, "w") as wheel:
        wheel.writestr("torch_npu/version.py", f"__version__ = '{version}'\ngit_version = 'abc'\n")
        wheel.writestr("torch_npu/csrc/aten/npu_native_functions_by_codegen.yaml", yaml)
        wheel.writestr("torch_npu/lib/libtorch_npu.so", elf_with_rodata(RODATA if rodata is None else rodata))
    return path
