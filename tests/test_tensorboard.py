"""The TensorBoard writer: CRC-32C and the record framing against known values, an Event encoded
by hand, files read back by our reader and (where the protobuf runtime is installed) by a
protobuf parser built from the Event/Summary schema, and `hierfl run --tensorboard`."""
from __future__ import annotations

import glob
import math
import os
import struct

import pytest

from hierfl import cli
from hierfl.outputs import Series
from hierfl.outputs import tensorboard as tb


def test_crc32c_and_mask_known_values():
    assert tb.crc32c(b"") == 0
    assert tb.crc32c(b"123456789") == 0xE3069283             # the CRC-32C check value
    assert tb.crc32c(bytes(32)) == 0x8A9136AA                # RFC 3720 B.4: 32 bytes of zeros
    c = 0xE3069283
    assert tb.masked_crc(b"123456789") == ((((c >> 15) | (c << 17)) & 0xFFFFFFFF)
                                           + 0xA282EAD8) & 0xFFFFFFFF


def test_event_bytes_by_hand():
    ev = tb.event(1.5, 3, scalars=[("a", 0.5)])
    value = bytes([0x0A, 0x01]) + b"a" + bytes([0x15]) + struct.pack("<f", 0.5)   # tag, simple
    summary = bytes([0x0A, len(value)]) + value                                  # Value
    assert ev == (bytes([0x09]) + struct.pack("<d", 1.5) + bytes([0x10, 0x03])
                  + bytes([0x2A, len(summary)]) + summary)
    rec = tb.record(ev)
    assert rec[:8] == struct.pack("<Q", len(ev)) and rec[12:-4] == ev
    assert struct.unpack("<I", rec[8:12])[0] == tb.masked_crc(rec[:8])
    assert tb.parse_event(ev) == {"wall_time": 1.5, "step": 3, "file_version": None,
                                  "scalars": [("a", 0.5)]}


ROWS = [{"round": 0.0, "sim_time_s": 0.0, "test_acc": 0.25, "bytes_up": 0.0, "diverged": 0.0},
        {"round": 1.0, "sim_time_s": 1.2345, "test_acc": math.nan, "bytes_up": 864.0,
         "diverged": 0.0},
        {"round": 2.0, "sim_time_s": 2.5, "test_acc": 0.75, "bytes_up": 1728.0, "diverged": 0.0}]


def test_write_and_read_back(tmp_path):
    (path,) = tb.write_tensorboard(str(tmp_path), [Series("fedavg", ROWS)], "p1")
    assert os.path.dirname(path) == str(tmp_path / "p1" / "fedavg")
    evs = tb.read_events(path)
    assert evs[0]["file_version"] == "brain.Event:2"
    by = {}
    for e in evs[1:]:
        for tag, v in e["scalars"]:
            by.setdefault(tag, []).append((e["step"], e["wall_time"], v))
    assert by["by_round/test_acc"] == [(0, 0.0, 0.25), (2, 2.5, 0.75)]        # NaN left out
    assert by["by_sim_time_ms/test_acc"] == [(0, 0.0, 0.25), (2500, 2.5, 0.75)]
    assert by["by_sim_time_ms/bytes_up"] == [(0, 0.0, 0.0), (1234, 1.2345, 864.0),
                                             (2500, 2.5, 1728.0)]
    assert not any("diverged" in t or t.endswith("/round") for t in by)
    # rewriting replaces our file; a damaged byte is detected
    (again,) = tb.write_tensorboard(str(tmp_path), [Series("fedavg", ROWS[:1])], "p1")
    assert glob.glob(str(tmp_path / "p1" / "fedavg" / "*")) == [again]
    raw = bytearray(open(again, "rb").read())
    raw[-6] ^= 0xFF
    open(again, "wb").write(bytes(raw))
    with pytest.raises(ValueError, match="bad or cut record"):
        tb.read_events(again)


def _protobuf_event_class():
    """tensorflow.Event with only the fields we write, from its schema (no TensorFlow)."""
    pb = pytest.importorskip("google.protobuf")
    del pb
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
    F = descriptor_pb2.FieldDescriptorProto
    f = descriptor_pb2.FileDescriptorProto(name="hierfl_tb_test.proto", package="tbtest")
    ev = f.message_type.add(name="Event")
    for name, num, typ in (("wall_time", 1, F.TYPE_DOUBLE), ("step", 2, F.TYPE_INT64),
                           ("file_version", 3, F.TYPE_STRING)):
        ev.field.add(name=name, number=num, type=typ, label=F.LABEL_OPTIONAL)
    ev.field.add(name="summary", number=5, type=F.TYPE_MESSAGE, label=F.LABEL_OPTIONAL,
                 type_name=".tbtest.Summary")
    sm = f.message_type.add(name="Summary")
    sm.field.add(name="value", number=1, type=F.TYPE_MESSAGE, label=F.LABEL_REPEATED,
                 type_name=".tbtest.Value")
    val = f.message_type.add(name="Value")
    val.field.add(name="tag", number=1, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL)
    val.field.add(name="simple_value", number=2, type=F.TYPE_FLOAT, label=F.LABEL_OPTIONAL)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(f)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("tbtest.Event"))


def test_events_parse_with_protobuf_runtime():
    Event = _protobuf_event_class()
    evs = [Event.FromString(e) for e in tb.series_events(ROWS)]
    assert evs[0].file_version == "brain.Event:2"
    got = [(e.step, v.tag, v.simple_value) for e in evs[1:] for v in e.summary.value
           if v.tag.endswith("test_acc")]
    assert got == [(0, "by_round/test_acc", 0.25), (0, "by_sim_time_ms/test_acc", 0.25),
                   (2, "by_round/test_acc", 0.75), (2500, "by_sim_time_ms/test_acc", 0.75)]


def test_run_with_tensorboard(tmp_path, capsys):
    (tmp_path / "s.yaml").write_text(
        "name: t\nseed: 1\ntopology: {edges: {count: 1}, clients: {count: 2}}\n"
        "data: {name: synthetic, dim: 4, classes: 2}\nmodel: {name: logreg}\n"
        "train: {rounds: 2, clients_per_round: 2, local: {steps: 2, batch_size: 4, lr: 0.1}}\n"
        "algorithms:\n  - {name: fedavg}\n  - {name: hierfavg, edge_rounds: 2}\noutput: out\n")
    logs = tmp_path / "tb"
    assert cli.main(["run", str(tmp_path / "s.yaml"), "--quiet", "--tensorboard",
                     str(logs)]) == 0
    from hierfl.outputs import read_run
    for s in read_run(str(tmp_path / "out")):
        (f,) = glob.glob(str(logs / s.label / "events.out.tfevents.*"))
        acc = [(e["step"], v) for e in tb.read_events(f) for t, v in e["scalars"]
               if t == "by_round/test_acc"]
        want = [(int(r["round"]), struct.unpack("<f", struct.pack("<f", r["test_acc"]))[0])
                for r in s.rows if math.isfinite(r.get("test_acc", math.nan))]
        assert acc == want and len(want) == 3
    cap = capsys.readouterr()
    assert "tensorboard --logdir" in cap.out + cap.err
    (tmp_path / "file").write_text("x")
    assert cli.main(["run", str(tmp_path / "s.yaml"), "--out", str(tmp_path / "o2"),
                     "--tensorboard", str(tmp_path / "file" / "tb")]) == 2
    assert "--tensorboard" in capsys.readouterr().err
    assert not (tmp_path / "o2").exists()
