#!/usr/bin/python3
"""TensorBoard event files (issue 13), read by a reader of our own:

  - the TFRecord framing: each record's length and data carry a masked
    CRC32C, computed here from the polynomial (not with tptrain's code);
  - the Event, Summary and Image messages are decoded by Debian's
    python3-protobuf from descriptors written here after TensorFlow's
    event.proto and summary.proto (field numbers and types);
  - every scalar of stats.json is in the event file at its global_step,
    as float32;
  - the images are PNG files that zlib inflates to the pixels put.

Runs tests/c/test_catalogue.c's `tensorboard DIR` mode. Prints TAP.

usage: test_tensorboard.py PATH/TO/test_catalogue"""
import glob
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import traceback
import zlib

from google.protobuf import descriptor_pb2, descriptor_pool
from google.protobuf import message_factory

CHILD = sys.argv[1]


def crc32c(data):
    crc = 0xFFFFFFFF
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ 0x82F63B78 if crc & 1 else crc >> 1
    return crc ^ 0xFFFFFFFF


def masked(data):
    c = crc32c(data)
    return (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def records(path):
    """The TFRecords of a file, each CRC checked."""
    out = []
    with open(path, "rb") as f:
        buf = f.read()
    pos = 0
    while pos < len(buf):
        assert len(buf) - pos >= 12, "truncated record header at %d" % pos
        head = buf[pos:pos + 8]
        (length,) = struct.unpack("<Q", head)
        (lcrc,) = struct.unpack("<I", buf[pos + 8:pos + 12])
        assert lcrc == masked(head), "length CRC at %d" % pos
        data = buf[pos + 12:pos + 12 + length]
        assert len(data) == length, "truncated record at %d" % pos
        (dcrc,) = struct.unpack("<I", buf[pos + 12 + length:pos + 16 + length])
        assert dcrc == masked(data), "data CRC at %d" % pos
        out.append(data)
        pos += 16 + length
    return out


def event_class():
    """tensorflow.Event from its field numbers (event.proto, summary.proto)."""
    fd = descriptor_pb2.FileDescriptorProto(name="tb_test.proto", package="tbtest", syntax="proto3")
    T = descriptor_pb2.FieldDescriptorProto

    def msg(name, fields):
        m = fd.message_type.add(name=name)
        for fname, num, ftype, label, tname in fields:
            f = m.field.add(name=fname, number=num, type=ftype, label=label)
            if tname:
                f.type_name = ".tbtest." + tname
        return m

    opt, rep = T.LABEL_OPTIONAL, T.LABEL_REPEATED
    msg("Image", [("height", 1, T.TYPE_INT32, opt, None), ("width", 2, T.TYPE_INT32, opt, None),
                  ("colorspace", 3, T.TYPE_INT32, opt, None),
                  ("encoded_image_string", 4, T.TYPE_BYTES, opt, None)])
    msg("Value", [("tag", 1, T.TYPE_STRING, opt, None), ("simple_value", 2, T.TYPE_FLOAT, opt, None),
                  ("image", 4, T.TYPE_MESSAGE, opt, "Image")])
    msg("Summary", [("value", 1, T.TYPE_MESSAGE, rep, "Value")])
    msg("SessionLog", [("status", 1, T.TYPE_INT32, opt, None), ("checkpoint_path", 2, T.TYPE_STRING, opt, None),
                       ("msg", 3, T.TYPE_STRING, opt, None)])
    msg("Event", [("wall_time", 1, T.TYPE_DOUBLE, opt, None), ("step", 2, T.TYPE_INT64, opt, None),
                  ("file_version", 3, T.TYPE_STRING, opt, None), ("summary", 5, T.TYPE_MESSAGE, opt, "Summary"),
                  ("session_log", 6, T.TYPE_MESSAGE, opt, "SessionLog")])
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fd)
    desc = pool.FindMessageTypeByName("tbtest.Event")
    if hasattr(message_factory, "GetMessageClass"):
        return message_factory.GetMessageClass(desc)
    return message_factory.MessageFactory(pool).GetPrototype(desc)


def png_pixels(data):
    """(width, height, channels, rows of bytes) of a filter-0, 8-bit PNG."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG signature"
    pos, idat, ihdr = 8, b"", None
    while pos < len(data):
        (n,) = struct.unpack(">I", data[pos:pos + 4])
        kind = data[pos + 4:pos + 8]
        body = data[pos + 8:pos + 8 + n]
        (crc,) = struct.unpack(">I", data[pos + 8 + n:pos + 12 + n])
        assert crc == zlib.crc32(kind + body) & 0xFFFFFFFF, "PNG chunk CRC of %r" % kind
        if kind == b"IHDR":
            ihdr = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat += body
        pos += 12 + n
    w, h, depth, color, _, _, interlace = ihdr
    assert depth == 8 and interlace == 0
    c = {0: 1, 2: 3, 6: 4}[color]
    raw = zlib.decompress(idat)
    rows = []
    for y in range(h):
        line = raw[y * (w * c + 1):(y + 1) * (w * c + 1)]
        assert line[0] == 0, "filter type %d" % line[0]
        rows.append(list(line[1:]))
    return w, h, c, rows


def run_and_read(tmp):
    logdir = os.path.join(tmp, "run")
    os.mkdir(logdir)
    subprocess.run([CHILD, "tensorboard", logdir], check=True, timeout=240)
    files = glob.glob(os.path.join(logdir, "events.out.tfevents.*"))
    assert len(files) == 1, files
    Event = event_class()
    events = []
    for data in records(files[0]):
        e = Event()
        e.ParseFromString(data)
        events.append(e)
    with open(os.path.join(logdir, "stats.json")) as f:
        stats = json.load(f)
    return events, stats


TESTS = []


def test(fn):
    TESTS.append(fn)
    return fn


STATE = {}


@test
def records_and_crcs_and_the_version_event():
    events, _ = STATE["run"]
    assert events[0].file_version == "brain.Event:2", events[0]
    assert events[0].wall_time > 1.6e9
    assert len(events) > 10


@test
def every_stats_json_scalar_is_in_the_event_file():
    events, stats = STATE["run"]
    by = {}
    for e in events:
        for v in e.summary.value:
            if v.HasField("image"):
                continue
            by.setdefault((v.tag, e.step), []).append(v.simple_value)
    assert stats, "stats.json is empty"
    n = 0
    for entry in stats:
        step = entry["global_step"]
        for name, value in entry.items():
            if name in ("global_step", "epoch_num") or value is None:
                continue
            got = by.get((name, step))
            assert got, "%s at step %d is not in the event file" % (name, step)
            want = struct.unpack("<f", struct.pack("<f", value))[0]
            assert got[-1] == want, "%s at step %d: %r in the event file, %r in stats.json" % (name, step, got, value)
            n += 1
    for name in ("validation_error", "validation_cost", "host_error", "cost"):
        assert any(k[0] == name for k in by), name
    assert n >= 8, n


@test
def images_are_the_pixels_put():
    events, _ = STATE["run"]
    seen = {}
    for e in events:
        for v in e.summary.value:
            if v.HasField("image"):
                seen.setdefault(v.tag, []).append((e.step, v.image))
    assert sorted(seen) == ["grey/0", "grey/1", "rgb"], sorted(seen)
    for step, img in seen["rgb"]:
        epoch = step // 3
        w, h, c, rows = png_pixels(img.encoded_image_string)
        assert (img.width, img.height, img.colorspace) == (3, 2, 3) and (w, h, c) == (3, 2, 3)
        for y in range(2):
            for x in range(3):
                for ch in range(3):
                    assert rows[y][x * 3 + ch] == 10 * y + x + 40 * ch + epoch, (y, x, ch, rows)
    assert [s for s, _ in seen["rgb"]] == [3, 6]
    want = {"grey/0": [[0, 64], [127, 255]], "grey/1": [[255, 0], [1, 2]]}
    for tag, pix in want.items():
        for _, img in seen[tag]:
            w, h, c, rows = png_pixels(img.encoded_image_string)
            assert (w, h, c) == (2, 2, 1) and img.colorspace == 1
            assert rows == pix, (tag, rows)


@test
def a_resumed_run_starts_its_file_with_session_log_start():
    # 1 epoch of 3 steps with a checkpoint (model-3), then a resumed run to
    # epoch 2: its file starts with the version, then START at step 4.
    logdir = os.path.join(STATE["tmp"], "resumed")
    os.mkdir(logdir)
    subprocess.run([CHILD, "tensorboard-resume", logdir], check=True, timeout=240)
    files = sorted(glob.glob(os.path.join(logdir, "events.out.tfevents.*")))
    assert len(files) == 2, files
    Event = event_class()
    runs = []
    for path in files:
        evs = []
        for data in records(path):
            e = Event()
            e.ParseFromString(data)
            evs.append(e)
        runs.append(evs)
    first, second = (runs if not runs[0][1].HasField("session_log") else runs[::-1])
    assert not any(e.HasField("session_log") for e in first)
    assert second[0].file_version == "brain.Event:2"
    assert second[1].HasField("session_log") and second[1].session_log.status == 1, second[1]
    assert second[1].step == 4, second[1].step
    steps = [e.step for e in second[2:] if e.summary.value]
    assert steps and min(steps) >= 4 and max(steps) == 6, steps
    assert max(e.step for e in first if e.summary.value) == 3


@test
def a_damaged_record_is_detected_by_the_reader():
    # The reader itself can fail: flip one byte of a copy and the CRC check
    # must say so.
    tmp = STATE["tmp"]
    src = glob.glob(os.path.join(tmp, "run", "events.out.tfevents.*"))[0]
    with open(src, "rb") as f:
        buf = bytearray(f.read())
    buf[40] ^= 0x01
    bad = os.path.join(tmp, "bad")
    with open(bad, "wb") as f:
        f.write(buf)
    try:
        records(bad)
    except AssertionError as e:
        assert "CRC" in str(e), e
    else:
        raise AssertionError("a flipped byte went unnoticed")


def main():
    print("TAP version 13")
    print("1..%d" % len(TESTS))
    tmp = tempfile.mkdtemp(prefix="tpt-tb-")
    failed = 0
    try:
        STATE["tmp"] = tmp
        STATE["run"] = run_and_read(tmp)
        for i, fn in enumerate(TESTS, 1):
            try:
                fn()
                print("ok %d - %s" % (i, fn.__name__))
            except Exception:
                failed += 1
                print("not ok %d - %s" % (i, fn.__name__))
                for line in traceback.format_exc().splitlines():
                    print("# " + line)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
