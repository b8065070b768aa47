"""TensorBoard event files of scalars, written and read without the tensorboard library.

An event file is a TFRecord stream (length, masked CRC-32C of the length, the record, masked
CRC-32C of the record) of `Event` protocol buffers; a scalar is an Event carrying a Summary with
one Value (tag, simple_value). These few fields are all the training stage writes, so the
framework writes and reads them here instead of taking tensorboard (with grpcio, protobuf,
werkzeug) as a dependency; TensorBoard itself reads the file (tests check it with its own
reader; `uv run --extra tensorboard tensorboard --logdir ...` shows it).
"""

from __future__ import annotations

import socket
import struct
import time
from collections.abc import Iterable, Iterator
from pathlib import Path

FILE_VERSION = b"brain.Event:2"  # the first event of every file, as TensorBoard's own writer puts it
_MASK_DELTA = 0xA282EAD8


def _crc32c_table() -> list[int]:
    table = []
    for byte in range(256):
        crc = byte
        for _ in range(8):
            crc = (crc >> 1) ^ 0x82F63B78 if crc & 1 else crc >> 1  # Castagnoli, reflected
        table.append(crc)
    return table


_TABLE = _crc32c_table()


def _masked_crc(data: bytes) -> int:
    crc = 0xFFFFFFFF
    for byte in data:
        crc = _TABLE[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    crc ^= 0xFFFFFFFF
    return (((crc >> 15) | (crc << 17)) + _MASK_DELTA) & 0xFFFFFFFF


def _varint(value: int) -> bytes:
    out = bytearray()
    value &= (1 << 64) - 1  # int64 on the wire: a negative step is ten bytes, as protobuf writes it
    while True:
        byte, value = value & 0x7F, value >> 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def _field(number: int, payload: bytes) -> bytes:
    """A length-delimited field (wire type 2): strings and nested messages."""
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def _event(wall_time: float, step: int, body: bytes) -> bytes:
    """Event: wall_time (1, double), step (2, int64), then file_version (3) or summary (5)."""
    return b"\x09" + struct.pack("<d", wall_time) + b"\x10" + _varint(step) + body


def _scalar(step: int, tag: str, value: float, wall_time: float) -> bytes:
    """Summary.Value: tag (1, string), simple_value (2, float32)."""
    summary_value = _field(1, tag.encode()) + b"\x15" + struct.pack("<f", value)
    return _event(wall_time, step, _field(5, _field(1, summary_value)))


def _record(data: bytes) -> bytes:
    length = struct.pack("<Q", len(data))
    return length + struct.pack("<I", _masked_crc(length)) + data + struct.pack("<I", _masked_crc(data))


def write_scalars(directory: Path, scalars: Iterable[tuple[str, int, float, float]]) -> Path:
    """One event file in `directory` of (tag, step, value, wall time) scalars; its path."""
    path = directory / f"events.out.tfevents.{int(time.time())}.{socket.gethostname()}"
    with path.open("wb") as out:
        out.write(_record(_event(time.time(), 0, _field(3, FILE_VERSION))))
        for tag, step, value, wall_time in scalars:
            out.write(_record(_scalar(step, tag, value, wall_time)))
    return path


def _fields(data: bytes) -> Iterator[tuple[int, int, bytes | int]]:
    """(field number, wire type, value) of a message: varints as ints, the rest as their bytes."""
    pos = 0
    while pos < len(data):
        key, pos = _read_varint(data, pos)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = _read_varint(data, pos)
            yield number, wire, value
        elif wire in (1, 5):
            size = 8 if wire == 1 else 4
            yield number, wire, data[pos : pos + size]
            pos += size
        elif wire == 2:
            size, pos = _read_varint(data, pos)
            yield number, wire, data[pos : pos + size]
            pos += size
        else:
            raise ValueError(f"unsupported protobuf wire type {wire}")


def _read_varint(data: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if pos >= len(data):
            raise ValueError("truncated protobuf varint")
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return value, pos


def _records(path: Path) -> Iterator[bytes]:
    raw = path.read_bytes()
    pos = 0
    while pos < len(raw):
        header = raw[pos : pos + 12]
        if len(header) < 12:
            raise ValueError(f"{path.name}: truncated record at byte {pos}")
        (length,) = struct.unpack("<Q", header[:8])
        data = raw[pos + 12 : pos + 12 + length]
        footer = raw[pos + 12 + length : pos + 16 + length]
        if struct.unpack("<I", header[8:])[0] != _masked_crc(header[:8]) or len(footer) < 4:
            raise ValueError(f"{path.name}: corrupt record header at byte {pos}")
        if struct.unpack("<I", footer)[0] != _masked_crc(data):
            raise ValueError(f"{path.name}: record at byte {pos} fails its checksum")
        yield data
        pos += 16 + length


def read_scalars(directory: Path) -> dict[str, list[tuple[int, float]]]:
    """{tag: [(step, value)]} of every scalar in the directory's event files, in file then write
    order; ValueError for a file that is not a well-formed event file."""
    scalars: dict[str, list[tuple[int, float]]] = {}
    for path in sorted(directory.glob("*tfevents*")):
        for record in _records(path):
            step, summaries = 0, []
            for number, wire, value in _fields(record):
                if number == 2 and wire == 0 and isinstance(value, int):
                    step = value - (1 << 64) if value >> 63 else value
                elif number == 5 and wire == 2 and isinstance(value, bytes):
                    summaries.append(value)
            for summary in summaries:
                for number, _, entry in _fields(summary):
                    if number == 1 and isinstance(entry, bytes):
                        tag, simple = _tag_value(entry)
                        if tag is not None and simple is not None:
                            scalars.setdefault(tag, []).append((step, simple))
    return scalars


def _tag_value(entry: bytes) -> tuple[str | None, float | None]:
    tag: str | None = None
    simple: float | None = None
    for number, wire, value in _fields(entry):
        if number == 1 and wire == 2 and isinstance(value, bytes):
            tag = value.decode()
        elif number == 2 and wire == 5 and isinstance(value, bytes):
            simple = struct.unpack("<f", value)[0]
    return tag, simple
