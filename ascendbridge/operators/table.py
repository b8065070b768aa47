"""A torch_npu release's operator table, derived from its wheel without importing it (no CANN).

Two sources, both read from the wheel's zip:
- `torch_npu/csrc/aten/npu_native_functions_by_codegen.yaml`: the signatures the release's codegen
  registers for the NPU backend (sections `supported`, `symint`, `autograd`, `quant`: ATen ops;
  `custom`: the release's own `npu_*` operators), read with PyYAML: each top-level list a section,
  its items `- name` or `- func: signature` mappings.
- `torch_npu/lib/libtorch_npu.so`: what the library really registers. Its read-only data (`.rodata`
  and the `.rodata.str*` sections newer toolchains split strings into, found through the ELF
  section headers) holds the dispatcher's registration literals (`topk.values`) and
  the names of the generated kernel wrappers, `wrapper_<Key>_<overload>_<kernel>` (e.g.
  `wrapper_NPU_values_topk_out`), as C++ type names with a length prefix. An op `name.overload` is
  registered when a wrapper of an NPU dispatch key names its overload and a kernel `name`
  (`name_out`, `name_`) and the literal `name.overload` is there (possibly as the tail of a
  longer string: the linker merges string tails); an op without overload when a wrapper
  `wrapper_<Key>__<name>` exists and `name` is a string of its own there or declared in the YAML.
The table is the union, each op with where it was found; `data/torch_npu-<version>.json` holds it
with the wheel's URL and sha256 (scripts/op_coverage.py build-table regenerates it).
Dtypes: the wheel carries no list of the dtypes a kernel takes (those checks live in CANN's
kernels). What it does carry is torch_npu's own dtype-check messages in the library's read-only
data; the few that name their op first (`bmm is not support int8 dtype`, `logspace only support
float32 and float16, given type is `) are kept per op as `dtype_checks`: text for a reader, never
turned into a dtype list (a message says what one code path refuses, not all that a kernel takes).
"""

from __future__ import annotations

import hashlib
import json
import re
import struct
import zipfile
from collections.abc import Collection
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

YAML_PATH = "torch_npu/csrc/aten/npu_native_functions_by_codegen.yaml"
LIBRARY_PATH = "torch_npu/lib/libtorch_npu.so"
VERSION_PATH = "torch_npu/version.py"
DATA_DIR = Path(__file__).resolve().parent / "data"
TABLE_FORMAT = "ascendbridge.op_table/1"
PINNED_RELEASE = "2.7.1.post2"  # the release the product pins (docs/operators.md); others are compared
ATEN_SECTIONS = ("supported", "symint", "autograd", "quant")
NPU_KEYS = ("NPU", "AutogradNPU", "SparseNPU", "PrivateUse1", "AutogradPrivateUse1")
_OP_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z0-9_]+)?$")
_OVERLOAD = re.compile(r"[A-Za-z0-9_]+")
# `_GLOBAL__N_1` (an anonymous namespace) ends in a digit that is no part of the length after it.
_WRAPPER = re.compile(rb"(?:_GLOBAL__N_1)?(\d+)wrapper_(" + b"|".join(k.encode() for k in NPU_KEYS) + rb")_")
_PLAIN_WRAPPER = re.compile(r"^wrapper_(" + "|".join(NPU_KEYS) + r")_([A-Za-z0-9_]+)$")
# A dtype-check message naming its op first: `<op> [input...] only support(s|ed) / is not support /
# must be ...` and a dtype (torch_npu's TORCH_CHECK texts).
_DTYPE_CHECK = re.compile(
    r"^([A-Za-z0-9_]+)(?: input\w*)? (?:only supports?|only supported|is not support|must be)\b"
    r".{0,60}\b(?:float16|bfloat16|float32|float|half|int8|int32|int64|double|fp64|"
    r"floating-point|dtypes?)\b",
    re.I,
)


class TableError(Exception):
    """A wheel or table file that cannot be read as one (one line, for the CLI)."""


@dataclass
class OpTable:
    """One release's table: op name (`name` or `name.overload`) -> where it was found."""

    release: str
    source: dict[str, Any]
    ops: dict[str, list[str]] = field(default_factory=dict)  # e.g. {"topk": ["yaml:supported", "so:NPU"]}
    custom: list[str] = field(default_factory=list)  # the release's own npu_* operators
    # op -> the dtypes its kernel takes, where known (a wheel carries no such lists: empty for
    # tables built from one; the gap report checks dtypes only for the ops listed here)
    dtypes: dict[str, list[str]] = field(default_factory=dict)
    # op base name -> torch_npu's dtype-check messages that name it (dtype_checks; text, not a list)
    dtype_checks: dict[str, list[str]] = field(default_factory=dict)

    def has(self, op: str) -> bool:
        """True when the release registers `op` (`name` or `name.overload`) for the NPU."""
        return op in self.ops

    def counts(self) -> dict[str, int]:
        in_yaml = {o for o, where in self.ops.items() if any(w.startswith("yaml:") for w in where)}
        in_so = {o for o, where in self.ops.items() if any(w.startswith("so:") for w in where)}
        return {
            "ops": len(self.ops),
            "yaml": len(in_yaml),
            "so": len(in_so),
            "yaml_only": len(in_yaml - in_so),
            "so_only": len(in_so - in_yaml),
            "custom": len(self.custom),
        }

    def to_json(self) -> dict[str, Any]:
        return {
            "format": TABLE_FORMAT,
            "release": self.release,
            "source": self.source,
            "counts": self.counts(),
            "dtypes": self.dtypes,
            "dtype_checks": {o: self.dtype_checks[o] for o in sorted(self.dtype_checks)},
            "ops": {o: self.ops[o] for o in sorted(self.ops)},
            "custom": sorted(self.custom),
        }


def yaml_ops(text: str) -> dict[str, list[str]]:
    """Op name -> [section] from the codegen YAML: each top-level list is a section, its items an op
    name or a mapping whose `func` is a signature. TableError when the file is not such YAML."""
    try:
        document = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise TableError(f"{YAML_PATH} is not valid YAML: {str(exc).splitlines()[0]}") from None
    if not isinstance(document, dict):
        raise TableError(f"{YAML_PATH} is not a mapping of sections")
    found: dict[str, list[str]] = {}
    for section, items in document.items():
        if not isinstance(items, list):  # `backend: NPU`, `cpp_namespace: ...`
            continue
        for item in items:
            entry = item.get("func") if isinstance(item, dict) else item
            name = str(entry).split("(")[0].strip() if entry is not None else ""
            if _OP_NAME.match(name):
                found.setdefault(name, []).append(str(section))
    return found


def rodata_strings(library: bytes) -> list[bytes]:
    """The NUL-separated strings of an ELF64 little-endian library's read-only data sections
    (`.rodata` and the `.rodata.*` string sections some toolchains split it into)."""
    if library[:4] != b"\x7fELF" or library[4] != 2 or library[5] != 1:
        raise TableError("not an ELF64 little-endian library")
    (shoff,) = struct.unpack_from("<Q", library, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", library, 0x3A)

    def header(i: int) -> tuple[int, int, int]:
        name, _type, _flags, _addr, offset, size = struct.unpack_from("<IIQQQQ", library, shoff + i * shentsize)
        return name, offset, size

    strings: list[bytes] = []
    found = False
    try:
        _, names_at, _ = header(shstrndx)
        for i in range(shnum):
            name, offset, size = header(i)
            section = library[names_at + name : library.index(b"\0", names_at + name)]
            if section == b".rodata" or section.startswith(b".rodata."):
                strings += library[offset : offset + size].split(b"\0")
                found = True
    except (struct.error, ValueError) as exc:
        raise TableError(f"unreadable ELF section headers: {exc}") from None
    if not found:
        raise TableError("the library has no .rodata section")
    return strings


def wrappers(strings: list[bytes]) -> set[tuple[str, str]]:
    """(dispatch key, `<overload>_<kernel>`) of every generated NPU kernel wrapper named in `strings`:
    length-prefixed inside mangled type names, or a plain string of its own."""
    found: set[tuple[str, str]] = set()
    for s in strings:
        if b"wrapper_" not in s:
            continue
        for m in _WRAPPER.finditer(s):
            ident = s[m.start(2) - len(b"wrapper_") :][: int(m.group(1))].decode("ascii", "replace")
            key, _, rest = ident[len("wrapper_") :].partition("_")
            if key == m.group(2).decode() and rest and _OVERLOAD.fullmatch(ident):
                found.add((key, rest))
        plain = _PLAIN_WRAPPER.match(s.decode("ascii", "replace"))
        if plain:
            found.add((plain.group(1), plain.group(2)))
    return found


def library_ops(strings: list[bytes], declared: Collection[str] = ()) -> dict[str, list[str]]:
    """Op name -> [`so:<Key>`] for what libtorch_npu.so registers (module docstring: the rule);
    `declared`: the YAML's op names (an op without overload needs its literal or a YAML entry:
    a hand-written wrapper's name need not be its op's, `wrapper_NPU__softmax_backward_data` is
    `_softmax_backward_data`'s)."""
    by_overload: dict[str, set[str]] = {}  # ".overload" -> the op literals ending in it (tails included)
    for s in strings:
        text = s.decode("ascii", "replace")
        dot = text.rfind(".")
        if dot > 0 and _OVERLOAD.fullmatch(text[dot + 1 :]):
            by_overload.setdefault(text[dot:], set()).add(text)
    whole = {s.decode("ascii", "replace") for s in strings}
    found: dict[str, set[str]] = {}
    for key, rest in wrappers(strings):
        if rest.startswith("_"):  # no overload: wrapper_<Key>__<name>, and `name` a literal of its own
            if _OP_NAME.match(rest[1:]) and (rest[1:] in whole or rest[1:] in declared):
                found.setdefault(rest[1:], set()).add(f"so:{key}")
            continue
        for i, ch in enumerate(rest):
            if ch != "_" or i == 0:
                continue
            overload, kernel = rest[:i], rest[i + 1 :]
            literals = by_overload.get("." + overload, set())
            for base in {kernel, kernel.removesuffix("_out"), kernel.removesuffix("_")}:
                name = f"{base}.{overload}"
                if base and any(lit.endswith(name) for lit in literals):
                    found.setdefault(name, set()).add(f"so:{key}")
    return {op: sorted(where) for op, where in found.items()}


def dtype_checks(strings: list[bytes], names: Collection[str]) -> dict[str, list[str]]:
    """Op base name -> the library's dtype-check messages whose first word is that op (`mm_out`
    counts as `mm`); messages naming no op (`input must be half or float`) cannot be placed."""
    found: dict[str, set[str]] = {}
    for raw in strings:
        text = raw.decode("ascii", "replace")
        m = _DTYPE_CHECK.match(text)
        if m is None:
            continue
        first = m.group(1).lower()
        for name in (first, first.removesuffix("_out")):
            if name in names:
                found.setdefault(name, set()).add(text.strip())
                break
    return {op: sorted(messages) for op, messages in found.items()}


def wheel_version(wheel: zipfile.ZipFile) -> str:
    text = wheel.read(VERSION_PATH).decode()
    m = re.search(r"^__version__\s*=\s*['\"]([^'\"]+)['\"]", text, re.M)
    if not m:
        raise TableError(f"{VERSION_PATH} has no __version__")
    return m.group(1)


def build_table(wheel_path: Path, url: str | None = None) -> OpTable:
    """The operator table of one torch_npu wheel (read, never imported)."""
    wheel_path = Path(wheel_path)
    try:
        digest = hashlib.sha256(wheel_path.read_bytes()).hexdigest()
        with zipfile.ZipFile(wheel_path) as wheel:
            version = wheel_version(wheel)
            declared = yaml_ops(wheel.read(YAML_PATH).decode())
            strings = rodata_strings(wheel.read(LIBRARY_PATH))
            registered = library_ops(strings, declared)
    except (OSError, zipfile.BadZipFile, KeyError, UnicodeDecodeError) as exc:
        raise TableError(f"{wheel_path.name}: not a readable torch_npu wheel ({exc})") from None
    custom = sorted(op for op, sections in declared.items() if "custom" in sections)
    ops: dict[str, list[str]] = {}
    for op, sections in declared.items():
        aten = [s for s in sections if s in ATEN_SECTIONS]
        if aten:
            ops[op] = [f"yaml:{s}" for s in sorted(set(aten))]
    for op, where in registered.items():
        if op not in custom:
            ops.setdefault(op, []).extend(where)
    source = {
        "wheel": wheel_path.name,
        "sha256": digest,
        "url": url,
        "derived": f"{YAML_PATH} (sections {', '.join(ATEN_SECTIONS)}) + {LIBRARY_PATH} .rodata* "
        "(kernel wrappers of the NPU dispatch keys and their registration literals; "
        "dtype-check messages that name their op); ascendbridge/operators/table.py",
    }
    names = {op.partition(".")[0] for op in [*ops, *custom]}
    return OpTable(version, source, ops, custom, {}, dtype_checks(strings, names))


def table_path(release: str, data_dir: Path = DATA_DIR) -> Path:
    return Path(data_dir) / f"torch_npu-{release}.json"


def save_table(table: OpTable, data_dir: Path = DATA_DIR) -> Path:
    path = table_path(table.release, data_dir)
    path.parent.mkdir(parents=True, exist_ok=True)
    data = table.to_json()
    ops = data.pop("ops")
    head = json.dumps(data, indent=1)[:-2]  # one op a line below: a new release's diff reads op by op
    lines = ",\n".join(f"  {json.dumps(op)}: {json.dumps(where)}" for op, where in ops.items())
    path.write_text(f'{head},\n "ops": {{\n{lines}\n }}\n}}\n')
    return path


def load_table(release: str, data_dir: Path = DATA_DIR) -> OpTable:
    """The stored table of `release`; TableError names the releases that are stored."""
    path = table_path(release, data_dir)
    if not path.is_file():
        raise TableError(
            f"no operator table for torch_npu {release} (stored: {', '.join(releases(data_dir)) or 'none'})"
        )
    try:
        data = json.loads(path.read_text())
        if data.get("format") != TABLE_FORMAT:
            raise ValueError(f"format {data.get('format')!r}")
        return OpTable(
            str(data["release"]),
            dict(data["source"]),
            {k: list(v) for k, v in data["ops"].items()},
            list(data.get("custom") or []),
            {k: list(v) for k, v in (data.get("dtypes") or {}).items()},
            {k: list(v) for k, v in (data.get("dtype_checks") or {}).items()},
        )
    except (ValueError, KeyError, TypeError) as exc:
        raise TableError(f"{path.name}: not an operator table ({exc})") from None


def releases(data_dir: Path = DATA_DIR) -> list[str]:
    """The releases with a stored table, oldest name first."""
    return sorted(p.name[len("torch_npu-") : -len(".json")] for p in Path(data_dir).glob("torch_npu-*.json"))
