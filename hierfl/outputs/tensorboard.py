"""TensorBoard event files of a run's metrics, written without TensorFlow or TensorBoard (viewing
them needs TensorBoard: `pip install 'hierfl[tb]'`, then `tensorboard --logdir DIR`).

Layout: one TensorBoard run per algorithm, DIR/<label>/ (a sweep: DIR/<point>/<label>/), holding
one file `events.out.tfevents.<unix time>.<host>.hierfl`. Every finite value of every column of
metrics.csv (test_acc or test_mse, train_loss, bytes_*, sim_time_s, ...) is logged twice:

- `by_round/<metric>`: step = the cloud round;
- `by_sim_time_ms/<metric>`: step = the simulated time of that round in milliseconds (steps
  are integers), so TensorBoard's step axis reads simulated time.

Each event's wall_time is the round's simulated time in seconds too (TensorBoard's "relative"
axis then also shows simulated time), so the files are reproducible byte for byte. Rewriting
a run's logs replaces the earlier *.hierfl files of its folders (other files are left alone).

The format: a TFRecord file of serialized `tensorflow.Event` protocol buffers. Each record is
uint64 length (little-endian), uint32 masked CRC-32C of those 8 bytes, the data, uint32 masked
CRC-32C of the data; masked(crc) = ((crc >> 15) | (crc << 17)) + 0xa282ead8 (mod 2^32). Event:
wall_time = 1 (double), step = 2 (int64), file_version = 3 (string, "brain.Event:2"),
summary = 5 (Summary: repeated Value value = 1; Value: tag = 1 (string), simple_value = 2
(float)). `read_events` parses the same, checking every CRC."""
from __future__ import annotations

import math
import os
import socket
import struct
import time
from typing import Any, Iterable

from .lock import output_lock

FILE_VERSION = "brain.Event:2"
SUFFIX = ".hierfl"
SKIP = ("round", "diverged")      # the step itself; a flag, not a curve


# ------------------------------------------------------------------------------ CRC-32C
def _table() -> list[int]:
    poly, out = 0x82F63B78, []                 # Castagnoli, reflected
    for n in range(256):
        c = n
        for _ in range(8):
            c = (c >> 1) ^ poly if c & 1 else c >> 1
        out.append(c)
    return out


_TABLE = _table()


def crc32c(data: bytes) -> int:
    c = 0xFFFFFFFF
    for b in data:
        c = _TABLE[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


def masked_crc(data: bytes) -> int:
    c = crc32c(data)
    return ((((c >> 15) | (c << 17)) & 0xFFFFFFFF) + 0xA282EAD8) & 0xFFFFFFFF


def record(data: bytes) -> bytes:
    """One TFRecord: length, its masked CRC, the data, its masked CRC."""
    n = struct.pack("<Q", len(data))
    return n + struct.pack("<I", masked_crc(n)) + data + struct.pack("<I", masked_crc(data))


# ------------------------------------------------------------------------------ protobuf
def _varint(v: int) -> bytes:
    v &= (1 << 64) - 1                         # int64: two's complement, 10 bytes if negative
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        if v:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _field(num: int, wire: int, payload: bytes) -> bytes:
    return _varint((num << 3) | wire) + payload


def _bytes_field(num: int, data: bytes) -> bytes:
    return _field(num, 2, _varint(len(data)) + data)


def event(wall_time: float, step: int = 0, file_version: str | None = None,
          scalars: Iterable[tuple[str, float]] = ()) -> bytes:
    """A serialized tensorflow.Event (file version, or a Summary of simple_value scalars)."""
    out = _field(1, 1, struct.pack("<d", wall_time)) + _field(2, 0, _varint(step))
    if file_version is not None:
        out += _bytes_field(3, file_version.encode())
    values = b"".join(_bytes_field(1, _bytes_field(1, tag.encode())
                                   + _field(2, 5, struct.pack("<f", v))) for tag, v in scalars)
    if values:
        out += _bytes_field(5, values)
    return out


# ------------------------------------------------------------------------------ reading back
def _read_varint(buf: bytes, i: int) -> tuple[int, int]:
    shift = v = 0
    while True:
        b = buf[i]
        i += 1
        v |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return v, i


def _fields(buf: bytes) -> Iterable[tuple[int, Any]]:
    i = 0
    while i < len(buf):
        key, i = _read_varint(buf, i)
        num, wire = key >> 3, key & 7
        if wire == 0:
            v, i = _read_varint(buf, i)
        elif wire == 1:
            v, i = buf[i:i + 8], i + 8
        elif wire == 5:
            v, i = buf[i:i + 4], i + 4
        elif wire == 2:
            n, i = _read_varint(buf, i)
            v, i = buf[i:i + n], i + n
        else:
            raise ValueError(f"unsupported protobuf wire type {wire}")
        yield num, v


def parse_event(data: bytes) -> dict:
    """{wall_time, step, file_version, scalars: [(tag, value)]} of a serialized Event."""
    out: dict = {"wall_time": 0.0, "step": 0, "file_version": None, "scalars": []}
    for num, v in _fields(data):
        if num == 1:
            out["wall_time"] = struct.unpack("<d", v)[0]
        elif num == 2:
            out["step"] = v - (1 << 64) if v >= 1 << 63 else v
        elif num == 3:
            out["file_version"] = v.decode()
        elif num == 5:
            for vn, val in _fields(v):
                if vn == 1:
                    f = dict(_fields(val))
                    out["scalars"].append((f[1].decode(), struct.unpack("<f", f[2])[0]))
    return out


def read_events(path: str) -> list[dict]:
    """Every event of a TFRecord event file (a bad CRC or a cut record raises ValueError)."""
    with open(path, "rb") as fh:
        raw = fh.read()
    out, i = [], 0
    while i < len(raw):
        if i + 12 > len(raw):
            raise ValueError(f"{path}: record header cut at byte {i}")
        head = raw[i:i + 8]
        (n,) = struct.unpack("<Q", head)
        if struct.unpack("<I", raw[i + 8:i + 12])[0] != masked_crc(head):
            raise ValueError(f"{path}: bad length CRC at byte {i}")
        data = raw[i + 12:i + 12 + n]
        tail = raw[i + 12 + n:i + 16 + n]
        if len(data) != n or len(tail) != 4 or struct.unpack("<I", tail)[0] != masked_crc(data):
            raise ValueError(f"{path}: bad or cut record at byte {i}")
        out.append(parse_event(data))
        i += 16 + n
    return out


# ------------------------------------------------------------------------------ writing a run
def series_events(rows: list[dict[str, float]]) -> list[bytes]:
    """The events of one algorithm's metrics rows: the file version, then per row one event on
    the round axis and one on the simulated-time axis."""
    out = [event(0.0, 0, FILE_VERSION)]
    for r in rows:
        t = r.get("sim_time_s", math.nan)
        wall = t if math.isfinite(t) else 0.0
        vals = [(k, float(v)) for k, v in r.items()
                if k not in SKIP and isinstance(v, (int, float)) and math.isfinite(v)]
        if not vals:
            continue
        out.append(event(wall, int(r["round"]), scalars=[(f"by_round/{k}", v) for k, v in vals]))
        if math.isfinite(t):
            out.append(event(wall, int(round(t * 1000)),
                             scalars=[(f"by_sim_time_ms/{k}", v) for k, v in vals]))
    return out


def write_events(folder: str, events: list[bytes]) -> str:
    """DIR/<run>/events.out.tfevents.<time>.<host>.hierfl (earlier *.hierfl files removed)."""
    os.makedirs(folder, exist_ok=True)
    with output_lock(folder, key="--tensorboard", wait=True):   # two exports: one after the other
        for f in os.listdir(folder):
            if f.startswith("events.out.tfevents.") and f.endswith(SUFFIX):
                os.unlink(os.path.join(folder, f))
        host = "".join(c if c.isalnum() or c in "-_" else "-"
                       for c in socket.gethostname()) or "host"
        path = os.path.join(folder, f"events.out.tfevents.{int(time.time())}.{host}{SUFFIX}")
        tmp = path + ".tmp"
        with open(tmp, "wb") as fh:
            fh.write(b"".join(record(e) for e in events))
        os.replace(tmp, path)
    return path


def write_tensorboard(logdir: str, series: list[Any], prefix: str = "") -> list[str]:
    """One TensorBoard run per series (an algorithm: `.label`, `.rows`) under
    logdir/<prefix>/<label>; returns the event files written."""
    return [write_events(os.path.join(logdir, prefix, s.label), series_events(s.rows))
            for s in series]
