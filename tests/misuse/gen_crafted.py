#!/usr/bin/env python3
"""Crafted checkpoints, torch.save files and TorchScript archives, written
from scratch with the standard library only, as an attacker who knows the
documented format (docs/checkpoints.md) would write them: every file has a
well-formed zip and, for checkpoints, a correct trailer, and then one thing
wrong: a pickle that pops an empty stack, a tensor wider than its record, a
nesting a million deep, a zip bomb, counters that disagree, hyper-parameters
tpt_optimizer_set refuses, a generator state that reads past itself...

    gen_crafted.py --out DIR           writes the files and DIR/manifest.tsv
    gen_crafted.py --run DRIVER        writes them to a temporary folder and
                                       runs DRIVER (test_crafted_files) on it

manifest.tsv: file, mode (restore | resume | torchscript | read-limit: a
restore with the read limit at 0), expect (ok |
refuse), the tpt_code name expected, a fragment the message must contain.
The valid files hold the values W and B below: the driver checks that a
restore gives exactly them (a from-scratch writer of the documented format
is read back exactly), and that a refused file changes nothing.
"""
import io
import os
import struct
import subprocess
import sys
import tempfile
import warnings
import zipfile
import zlib

# The driver's model: fc/W [2, 3] (LibTorch's [out, in]) and fc/b [2] (float32), adam.
W = [0.5, -1.25, 2.0, 3.5, -0.75, 0.125]
B = [0.25, -4.0]

DTYPES = {  # name: (storage type, struct code, size)
    "float": ("FloatStorage", "<f", 4),
    "double": ("DoubleStorage", "<d", 8),
    "long": ("LongStorage", "<q", 8),
    "byte": ("ByteStorage", "B", 1),
    "bool": ("BoolStorage", "B", 1),
}


class T:
    """A tensor as _rebuild_tensor_v2 gives it; every field can be forged."""

    def __init__(self, dtype, values=None, size=None, stride=None, offset=0, raw=None, numel=None, key=None,
                 storage_type=None, location="cpu"):
        self.dtype = dtype
        st, code, width = DTYPES[dtype]
        if raw is None and values is not None:
            raw = b"".join(struct.pack(code, v) for v in values)
        self.raw = raw  # None: no record of its own (another tensor's, or none)
        self.numel = numel if numel is not None else len(raw) // width
        self.size = size if size is not None else [self.numel]
        if stride is None:
            stride, acc = [], 1
            for s in reversed(self.size):
                stride.insert(0, acc)
                acc *= s
        self.stride, self.offset, self.key = stride, offset, key
        self.storage_type = storage_type or st
        self.location = location


class Raw:
    """Pickle bytes put as they are."""

    def __init__(self, b):
        self.b = b


class OrderedDict(dict):
    """Written as torch.save writes a state_dict: collections.OrderedDict()
    and SETITEMs, then BUILD with the _metadata attribute."""


class Pickler:
    def __init__(self):
        self.out = bytearray(b"\x80\x02")
        self.records = {}  # "data/<key>" -> bytes
        self.next_key = 0

    def int_(self, v):
        if 0 <= v < 256:
            self.out += b"K" + bytes([v])
        elif 0 <= v < 65536:
            self.out += b"M" + struct.pack("<H", v)
        elif -2**31 <= v < 2**31:
            self.out += b"J" + struct.pack("<i", v)
        else:
            n = (v.bit_length() + 8) // 8
            self.out += b"\x8a" + bytes([n]) + v.to_bytes(n, "little", signed=True)

    def str_(self, s):
        b = s.encode() if isinstance(s, str) else s
        self.out += b"X" + struct.pack("<I", len(b)) + b

    def tensor(self, t):
        key = t.key if t.key is not None else str(self.next_key)
        self.next_key += 1
        if t.raw is not None and ("data/" + key) not in self.records:
            self.records["data/" + key] = t.raw
        self.out += b"ctorch._utils\n_rebuild_tensor_v2\n("
        self.out += b"(X" + struct.pack("<I", 7) + b"storage"
        self.out += b"ctorch\n" + t.storage_type.encode() + b"\n"
        self.str_(key)
        self.str_(t.location)
        self.int_(t.numel)
        self.out += b"tQ"
        self.int_(t.offset)
        self.dump(tuple(t.size))
        self.dump(tuple(t.stride))
        self.out += b"\x89ccollections\nOrderedDict\n)Rt" + b"R"

    def dump(self, o):
        if isinstance(o, Raw):
            self.out += o.b
        elif o is None:
            self.out += b"N"
        elif o is True:
            self.out += b"\x88"
        elif o is False:
            self.out += b"\x89"
        elif isinstance(o, int):
            self.int_(o)
        elif isinstance(o, float):
            self.out += b"G" + struct.pack(">d", o)
        elif isinstance(o, (str, bytes)):
            self.str_(o)
        elif isinstance(o, T):
            self.tensor(o)
        elif isinstance(o, tuple):
            if not o:
                self.out += b")"
            else:
                self.out += b"("
                for x in o:
                    self.dump(x)
                self.out += b"t"
        elif isinstance(o, list):
            self.out += b"]"
            if o:
                self.out += b"("
                for x in o:
                    self.dump(x)
                self.out += b"e"
        elif isinstance(o, OrderedDict):
            self.out += b"ccollections\nOrderedDict\n)R"
            for k, v in o.items():
                self.dump(k)
                self.dump(v)
                self.out += b"s"
            self.out += b"}X" + struct.pack("<I", 9) + b"_metadata}sb"  # BUILD({'_metadata': {}})
        elif isinstance(o, dict):
            self.out += b"}"
            if o:
                self.out += b"("
                for k, v in o.items():
                    self.dump(k)
                    self.dump(v)
                self.out += b"u"
        else:
            raise TypeError(type(o))

    def finish(self):
        return bytes(self.out) + b"."


def archive(pkl, records, name="archive", extra=(), deflate=(), order_pkl_first=True):
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_STORED) as z:
        entries = [("data.pkl", pkl)] + sorted(records.items()) + [("version", b"3\n")] + list(extra)
        for n, b in entries:
            ct = zipfile.ZIP_DEFLATED if n in deflate else zipfile.ZIP_STORED
            z.writestr(zipfile.ZipInfo(name + "/" + n), b, compress_type=ct)
    return buf.getvalue()


def checksum_v1(b):
    """The trailer's checksum, version 1 (docs/checkpoints.md)."""
    prime, mask = 0x100000001B3, (1 << 64) - 1
    h = 0xCBF29CE484222325
    n8 = len(b) // 8 * 8
    for (w,) in struct.iter_unpack("<Q", b[:n8]):
        h = ((h ^ w) * prime) & mask
        h ^= h >> 29
    for c in b[n8:]:
        h = ((h ^ c) * prime) & mask
    return h


def checksum_v2(b):
    """Version 2: four chains over the 8-byte words of each 32-byte block,
    folded into one, then the tail bytes (docs/checkpoints.md)."""
    prime, mask, basis = 0x100000001B3, (1 << 64) - 1, 0xCBF29CE484222325
    lanes = [basis ^ i for i in range(4)]
    n32 = len(b) // 32 * 32
    for k, (w,) in enumerate(struct.iter_unpack("<Q", b[:n32])):
        h = ((lanes[k % 4] ^ w) * prime) & mask
        lanes[k % 4] = h ^ (h >> 29)
    h = basis
    for lane in lanes:
        h = ((h ^ lane) * prime) & mask
        h ^= h >> 29
    for c in b[n32:]:
        h = ((h ^ c) * prime) & mask
    return h


_trailers = [0]


def with_trailer(z):
    """The two trailer versions by turns (tptrain writes 2 and still reads 1),
    so that half the crafted files meet each version's check."""
    _trailers[0] += 1
    if _trailers[0] % 2:
        return z + b"TPTCKPT2" + struct.pack("<QQ", len(z), checksum_v2(z))
    return z + b"TPTCKPT1" + struct.pack("<QQ", len(z), checksum_v1(z))


def generator_state(left=1, nxt=0, seed=5, seeded=1):
    """LibTorch's CPU generator state (5056 bytes) of mt19937 seeded with `seed`."""
    mt = [seed & 0xFFFFFFFF]
    for j in range(1, 624):
        mt.append((1812433253 * (mt[-1] ^ (mt[-1] >> 30)) + j) & 0xFFFFFFFF)
    b = struct.pack("<QiiQ", seed, left, seeded, nxt) + struct.pack("<624Q", *mt)
    b += struct.pack("<dddi", 0.0, 0.0, 0.0, 0) + b"\0" * 4 + struct.pack("<f", 0.0) + b"\0" * 4
    assert len(b) == 5056
    return b


def base(**change):
    """A valid checkpoint of the driver's model (the dict), with `change` applied."""
    d = {
        "format": "tptrain.checkpoint", "version": 1, "global_step": 4, "epoch_num": 2, "local_step": 1,
        "next_epoch": 3, "next_step": 0,
        "variables": {"fc/W": T("float", W, size=[2, 3]), "fc/b": T("float", B)},
        "trainable": ["fc/W", "fc/b"],
        "optimizer": {
            "kind": "adam",
            "hparams": {"learning_rate": 0.001, "beta1": 0.9, "beta2": 0.999, "eps": 1e-8, "weight_decay": 0.0,
                        "amsgrad": 0.0, "clip_global_norm": 0.0, "clip_global_norm_tf": 0.0, "clip_value": 0.0,
                        "accumulate_steps": 1.0, "check_numerics": 1.0},
            "micro_steps": 0,
            "state": {
                "fc/W": {"exp_avg": T("float", [0.0] * 6, size=[2, 3]), "exp_avg_sq": T("float", [0.0] * 6, size=[2, 3]), "step": 4},
                "fc/b": {"exp_avg": T("float", [0.0] * 2), "exp_avg_sq": T("float", [0.0] * 2), "step": 4},
            },
            "grads": {},
        },
        "callbacks": {},
        "moving_summaries": [{"name": "cost", "decay": 0.95, "biased": 1.0, "value": 1.0, "count": 4}],
        "rng": {"cpu": T("byte", raw=generator_state())},
    }
    for path, v in change.items():
        keys = path.split("__")
        o = d
        for k in keys[:-1]:
            o = o[k]
        if v is DELETE:
            del o[keys[-1]]
        else:
            o[keys[-1]] = v
    return d


DELETE = object()


def scaler(**change):
    """GradScaler.state_dict() of its defaults, with `change`."""
    d = {"scale": 65536.0, "growth_factor": 2.0, "backoff_factor": 0.5, "growth_interval": 2000, "_growth_tracker": 0}
    d.update(change)
    return d


def ckpt(d=None, pkl=None, records=None, **kw):
    p = Pickler()
    if pkl is None:
        p.dump(d if d is not None else base())
        pkl = p.finish()
    return with_trailer(archive(pkl, records if records is not None else p.records, **kw))


def state_dict_file(sd, **kw):
    p = Pickler()
    p.dump(sd)
    return archive(p.finish(), p.records, **kw)


def raw_pickle_ckpt(body):
    """A checkpoint whose pickle is `body` (opcodes after PROTO 2)."""
    return ckpt(pkl=b"\x80\x02" + body)


def cases():
    ok, bad = "ok", "refuse"
    INV = "TPT_ERR_INVALID_ARGUMENT"
    out = []

    def add(name, mode, expect, data, code="TPT_OK", fragment=""):
        out.append((name, mode, expect, code, fragment, data))

    # ---- valid files: read back exactly
    add("valid.ckpt", "restore", ok, ckpt())
    add("valid-resume.ckpt", "resume", ok, ckpt())
    add("valid-loss-scaler.ckpt", "resume", ok, ckpt(base(loss_scaler=scaler(scale=1024.0, _growth_tracker=7))))
    add("valid-run-end.ckpt", "resume", ok, ckpt(base(run_end={"how": "stopped", "by": "EarlyStopping(val)", "reason": "r"})))
    add("valid-read-limit-0.ckpt", "read-limit", bad, ckpt(), INV, "read limit")
    wt = [W[0], W[3], W[1], W[4], W[2], W[5]]  # W stored transposed, viewed with strides (1, 2)
    add("strided-view.ckpt", "restore", ok, ckpt(base(
        variables={"fc/W": T("float", wt, size=[2, 3], stride=[1, 2]), "fc/b": T("float", B)})))
    add("offset-view.ckpt", "restore", ok, ckpt(base(
        variables={"fc/W": T("float", [9.0] + W, size=[2, 3], stride=[3, 1], offset=1, numel=7), "fc/b": T("float", B)})))
    add("meta-location.ckpt", "restore", ok, ckpt(base(
        variables={"fc/W": T("float", W, size=[2, 3], location="meta"), "fc/b": T("float", B)})))
    add("state-dict.pt", "restore", ok, state_dict_file(OrderedDict([("fc.W", T("float", W, size=[2, 3])), ("fc.b", T("float", B))])))
    add("state-dict-deflated.pt", "restore", ok, state_dict_file(
        OrderedDict([("fc.W", T("float", W, size=[2, 3])), ("fc.b", T("float", B))]), deflate=("data/0", "data/1")))

    # ---- pickle structure: our machine refuses what LibTorch's crashed on
    for name, body, frag in [
        ("reduce-empty-stack", b"R.", "empty stack"),
        ("tuple2-empty-stack", b"K\x01\x86.", "empty stack"),
        ("build-empty-stack", b"b.", "empty stack"),
        ("build-one-item", b"}b.", "empty stack"),
        ("setitem-no-dict", b"K\x01K\x02K\x03s.", "SETITEM on an integer"),
        ("appends-no-mark", b"]e.", "without its MARK"),
        ("get-unset-memo", b"h\x07.", "never PUT"),
        ("pop-below-mark", b"}(s.", "empty stack"),
        ("unknown-opcode", b"\xff.", "opcode 0xff"),
        ("os-system", b"cos\nsystem\nX\x02\x00\x00\x00lsR.", "os.system"),
        ("eval", b"cbuiltins\neval\nX\x01\x00\x00\x001\x85R.", "builtins.eval"),
        ("stop-two-values", b"NN.", "STOP with 2 values"),
        ("truncated", b"X\xff\x00\x00\x00ab", "ends in the middle"),
        ("no-stop", b"N", "ends in the middle"),
        ("long4", b"\x8b\x04\x00\x00\x00\x00\x00\x00\x00.", "opcode 0x8b"),
        ("non-utf8-key", b"}X\x02\x00\x00\x00\xff\xfeK\x01s.", "not valid UTF-8"),
    ]:
        add(name + ".ckpt", "restore", bad, raw_pickle_ckpt(body), INV, frag)
    add("reduce-empty-stack.pt", "restore", bad, archive(b"\x80\x02R.", {}), INV, "empty stack")

    # ---- tensors against their records
    def var(t):
        return base(variables={"fc/W": t, "fc/b": T("float", B)})
    for name, t, frag in [
        ("stride-2p28", T("float", W, size=[2, 3], stride=[2**28, 1]), "reaches past its storage"),
        ("stride-2p32", T("float", W, size=[2, 3], stride=[2**32, 2**32]), "reaches past its storage"),
        ("size-2p31", T("float", W, size=[2**31], stride=[1]), "reaches past its storage"),
        ("offset-neg-2p40", T("float", W, size=[2, 3], offset=-2**40), "offset -1099511627776"),
        ("offset-2p61", T("float", W, size=[2, 3], offset=2**61), "reaches past its storage"),
        ("offset-near-max", T("float", W, size=[2, 3], stride=[2, 1], offset=2**63 - 2), "reaches past its storage"),
        ("size-overflow", T("float", W, size=[2**62, 2**62], stride=[0, 0]), "sizes overflow"),
        ("negative-stride", T("float", W, size=[2, 3], stride=[-2, 1], offset=4), "negative"),
        ("numel-wraps", T("float", W, size=[2, 3], numel=2**62), "record"),
        ("numel-past-record", T("float", W, size=[2, 3], numel=40), "has 24 bytes"),
        ("many-dims", T("float", W, size=[1] * 70, stride=[1] * 70), "70 dimensions"),
        ("unknown-storage", T("float", W, size=[2, 3], storage_type="QInt8Storage"), "torch.QInt8Storage"),
        ("key-traversal", T("float", W, size=[2, 3], key="../x"), "not a record name"),
    ]:
        add(name + ".ckpt", "restore", bad, ckpt(var(t)), INV, frag)
    # one record viewed as two dtypes (a float record as double)
    add("one-record-two-dtypes.ckpt", "restore", bad, ckpt(base(
        variables={"fc/W": T("float", W, size=[2, 3], key="0"),
                   "fc/b": T("double", raw=b"", numel=3, key="0", size=[2])})), INV, "given twice")
    add("record-missing.ckpt", "restore", bad, ckpt(var(T("float", W, size=[2, 3], key="77")),
                                                  records={}), INV, "no record")
    # a callback's state of 40 bytes over a 4-byte record
    add("callback-state-past-record.ckpt", "resume", bad, ckpt(base(
        callbacks={"state": T("byte", raw=b"\0" * 4, numel=40)})), INV, "has 4 bytes")
    add("stride-2p32.pt", "restore", bad, state_dict_file(
        {"fc.W": T("float", W, size=[2, 3], stride=[2**32, 1]), "fc.b": T("float", B)}), INV, "reaches past")

    # ---- nesting, sharing, sizes
    deep = b"]" * 1000000 + b"a" * 999999 + b"."
    add("nested-1e6-lists.ckpt", "restore", bad, raw_pickle_ckpt(deep), INV, "not a dict")
    deep_dict = b"}" + b"X\x01\x00\x00\x00a}" * 200000 + b"s" * 200000 + b"."
    add("nested-2e5-dicts.pt", "restore", bad, archive(b"\x80\x02" + deep_dict, {}), INV, "nested more than 32 deep")
    tag = "Dict[str, " * 20000 + "Tensor" + "]" * 20000
    add("deep-type-tag.ckpt", "restore", bad, raw_pickle_ckpt(
        b"ctorch.jit._pickle\nrestore_type_tag\n}X" + struct.pack("<I", len(tag)) + tag.encode() + b"\x86R."),
        INV, "type tag")
    # a 1 KB state_dict whose dicts share each other through the memo: 2^31 paths
    # (d_i = {'a': d_i-1, 'b': d_i-1}, the second a memo reference to the first)
    def dag(i):
        if i == 0:
            return b"}q\x00"
        return (b"}q" + bytes([i]) + b"(X\x01\x00\x00\x00a" + dag(i - 1) + b"X\x01\x00\x00\x00bh" + bytes([i - 1]) + b"u")
    add("memo-dag.pt", "restore", bad, archive(b"\x80\x02" + dag(31) + b".", {}), INV, "appears twice")
    # a 1 GiB entry of zeros deflated to about 1 MB
    add("zip-bomb.pt", "restore", bad, bomb_archive(deflated_zeros(1 << 30), 1 << 30), INV, "read limit")
    dup = io.BytesIO()
    p = Pickler()
    p.dump({"fc.W": T("float", W, size=[2, 3]), "fc.b": T("float", B)})
    with zipfile.ZipFile(dup, "w") as zz:
        zz.writestr(zipfile.ZipInfo("archive/data.pkl"), p.finish())
        zz.writestr(zipfile.ZipInfo("archive/data.pkl"), Pickler().finish())
        for k, v in p.records.items():
            zz.writestr(zipfile.ZipInfo("archive/" + k), v)
    add("duplicate-names.pt", "restore", bad, dup.getvalue(), INV, "twice")
    sd = OrderedDict([("fc.W", T("float", W, size=[2, 3])), ("fc.b", T("float", B))])
    add("zip64-records.pt", "restore", ok, with_zip64(state_dict_file(sd)))
    add("zip64-disagrees.pt", "restore", bad, with_zip64(state_dict_file(sd), offset_delta=30), INV, "disagree")
    add("bool-record.pt", "restore", bad, state_dict_file(
        {"fc.W": T("float", W, size=[2, 3]), "fc.b": T("float", B), "flag": T("bool", raw=b"\x00\x02")}), INV, "bool record")

    # ---- fields against each other and against the setters
    for name, d, frag in [
        ("epoch-ahead", base(epoch_num=1000), "next_epoch"),
        ("next-epoch-2p60", base(next_epoch=2**60, epoch_num=2**60 - 1), "outside"),
        ("next-step-mid-new-epoch", base(next_step=7), "next_step"),
        ("lr-negative", base(optimizer__hparams__learning_rate=-1.0), "learning_rate"),
        ("beta1-1.5", base(optimizer__hparams__beta1=1.5), "beta1"),
        ("eps-negative", base(optimizer__hparams__eps=-1.0), "eps"),
        ("accumulate-1e18", base(optimizer__hparams__accumulate_steps=1e18), "accumulate_steps"),
        ("accumulate-1e300", base(optimizer__hparams__accumulate_steps=1e300), "accumulate_steps"),
        ("amsgrad-7", base(optimizer__hparams__amsgrad=7.0), "amsgrad"),
        ("unknown-hparam", base(optimizer__hparams__nonsense=1.0), "nonsense"),
        ("unknown-kind", base(optimizer__kind="lbfgs"), "lbfgs"),
        ("micro-steps-past", base(optimizer__micro_steps=5), "micro_steps"),
        ("slot-shape", base(optimizer__state={"fc/W": {"exp_avg": T("float", [0.0] * 2), "step": 1}}), "exp_avg"),
        ("slot-unknown", base(optimizer__state={"fc/W": {"momentum_buffer": T("float", [0.0] * 6, size=[2, 3])}}),
         "momentum_buffer"),
        ("trainable-int", base(variables={"fc/W": T("long", [1] * 6, size=[2, 3]), "fc/b": T("float", B)}), "floating point"),
        ("rng-past-state", base(rng={"cpu": T("byte", raw=generator_state(left=624, nxt=624))}), "rng.cpu"),
        ("rng-short", base(rng={"cpu": T("byte", raw=b"\0" * 100)}), "rng.cpu"),
        ("rng-unseeded", base(rng={"cpu": T("byte", raw=generator_state(seeded=0))}), "seeded"),
        ("summary-twice", base(moving_summaries=[{"name": "c", "decay": 0.9, "biased": 0.0, "value": 0.0, "count": 0}] * 2), "twice"),
        ("summary-decay", base(moving_summaries=[{"name": "c", "decay": 1.5, "biased": 0.0, "value": 0.0, "count": 0}]), "decay"),
        # dynamic loss scaling's state (GradScaler.state_dict()'s keys)
        ("loss-scale-negative", base(loss_scaler=scaler(scale=-1.0)), "loss_scaler.scale"),
        ("loss-scale-nan", base(loss_scaler=scaler(scale=float("nan"))), "loss_scaler.scale"),
        ("loss-scale-inf", base(loss_scaler=scaler(scale=float("inf"))), "loss_scaler.scale"),
        ("loss-scale-past-float32", base(loss_scaler=scaler(scale=1e39)), "loss_scaler.scale"),
        ("loss-scale-string", base(loss_scaler=scaler(scale="big")), "not a number"),
        ("loss-scale-growth-1", base(loss_scaler=scaler(growth_factor=1.0)), "loss_scaler.growth_factor"),
        ("loss-scale-backoff-1.5", base(loss_scaler=scaler(backoff_factor=1.5)), "loss_scaler.backoff_factor"),
        ("loss-scale-interval-0", base(loss_scaler=scaler(growth_interval=0)), "loss_scaler.growth_interval"),
        ("loss-scale-tracker-past", base(loss_scaler=scaler(_growth_tracker=2000)), "loss_scaler._growth_tracker"),
        ("loss-scale-tracker-negative", base(loss_scaler=scaler(_growth_tracker=-1)), "loss_scaler._growth_tracker"),
        ("loss-scale-missing", base(loss_scaler={"scale": 1.0}), "is missing"),
        ("loss-scale-list", base(loss_scaler=[1.0]), "not a dict"),
        # how the run ended
        ("run-end-how", base(run_end={"how": "paused", "by": "", "reason": ""}), "run_end.how"),
        ("run-end-how-int", base(run_end={"how": 1, "by": "", "reason": ""}), "run_end.how"),
        ("run-end-by-list", base(run_end={"how": "stopped", "by": [], "reason": ""}), "run_end.by"),
        ("run-end-reason-missing", base(run_end={"how": "stopped", "by": ""}), "run_end.reason"),
        ("run-end-reason-long", base(run_end={"how": "stopped", "by": "", "reason": "x" * 5000}), "run_end.reason"),
        ("run-end-string", base(run_end="finished"), "not a dict"),
        ("key-twice", None, "twice"),
        ("format-missing", base(format=DELETE), "not a tptrain checkpoint"),
    ]:
        if name == "key-twice":
            p = Pickler()
            p.dump(base())
            pk = p.finish()[:-2] + b"X\x0b\x00\x00\x00global_stepK\x05u."  # a second global_step inside SETITEMS
            add(name + ".ckpt", "restore", bad, with_trailer(archive(pk, p.records)), INV, frag)
            continue
        add(name + ".ckpt", "resume", bad, ckpt(d), INV, frag)
    # known only to the trainer: a step past this trainer's epochs; a state its callback cannot take
    add("next-step-past-epoch.ckpt", "resume", bad, ckpt(base(epoch_num=3, next_epoch=3, local_step=40, next_step=41)),
        INV, "steps")
    add("callback-state-dtype.ckpt", "resume", bad, ckpt(base(
        callbacks={"state": T("byte", raw=struct.pack("<qq", 12, 0) + b"\0")})), INV, "tpt_dtype")
    add("callback-state-short.ckpt", "resume", bad, ckpt(base(
        callbacks={"state": T("byte", raw=struct.pack("<qq", 6, 1) + struct.pack("<q", 10) + b"\0" * 4)})), INV, "bytes")
    # a refused file changes nothing: variables fine, the optimizer's state not
    add("late-refusal.ckpt", "resume", bad, ckpt(base(optimizer__state={"fc/W": {"exp_avg": T("float", [0.0] * 5, size=[5])}})),
        INV, "exp_avg")
    add("late-refusal-restore-shape.ckpt", "restore", bad, ckpt(base(
        variables={"fc/W": T("float", W, size=[2, 3]), "fc/b": T("float", [1.0, 2.0, 3.0])}, optimizer=DELETE)),
        INV, "fc/b")

    # ---- TorchScript archives restored through tpt_model_restore
    add("torchscript-deep-parens.pt", "restore", bad, torchscript_archive("x = " + "(" * 100000 + "1" + ")" * 100000),
        INV, "nests brackets")
    add("torchscript-empty-stack.pt", "restore", bad, torchscript_archive("", data_pkl=b"\x80\x02R."), INV, "empty stack")
    return out


def bomb_archive(deflated, size):
    """A zip whose data/0 inflates `deflated` to `size` bytes (a state_dict over it)."""
    p = Pickler()
    p.dump({"w": T("byte", raw=None, numel=size, key="0")})
    pkl = p.finish()
    z = io.BytesIO()
    with zipfile.ZipFile(z, "w") as zz:
        zz.writestr(zipfile.ZipInfo("archive/data.pkl"), pkl)
    head = z.getvalue()
    # splice a raw deflated entry: local header, data, then a new central directory
    zf = zipfile.ZipFile(io.BytesIO(head))
    entries = []
    blob = bytearray()
    for info in zf.infolist():
        data = zf.read(info)
        entries.append((info.filename, 0, len(data), len(data), zlib.crc32(data), len(blob)))
        blob += local_header(info.filename, 0, len(data), len(data), zlib.crc32(data)) + data
    entries.append(("archive/data/0", 8, len(deflated), size, 0, len(blob)))
    blob += local_header("archive/data/0", 8, len(deflated), size, 0) + deflated
    cd = bytearray()
    for name, method, csize, usize, crc, off in entries:
        n = name.encode()
        cd += struct.pack("<IHHHHHHIIIHHHHHII", 0x02014B50, 20, 20, 0, method, 0, 0, crc, csize, usize, len(n), 0, 0, 0, 0, 0, off) + n
    end = struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, len(entries), len(entries), len(cd), len(blob), 0)
    return bytes(blob + cd + end)


def deflated_zeros(n):
    c = zlib.compressobj(9, zlib.DEFLATED, -15)
    chunk = b"\0" * (1 << 24)
    out = [c.compress(chunk) for _ in range(n // len(chunk))]
    return b"".join(out) + c.flush()


def with_zip64(z, offset_delta=0):
    """`z` with a zip64 end record and locator before its end record (as an
    archive over 4 GiB has them), the zip64 record's directory offset moved
    by `offset_delta`."""
    eocd = len(z) - 22
    sig, _, _, n, total, cd_size, cd_offset, _ = struct.unpack("<IHHHHIIH", z[eocd:])
    assert sig == 0x06054B50
    rec = struct.pack("<IQHHIIQQQQ", 0x06064B50, 44, 45, 45, 0, 0, n, total, cd_size, cd_offset + offset_delta)
    loc = struct.pack("<IIQI", 0x07064B50, 0, eocd, 1)
    return z[:eocd] + rec + loc + z[eocd:]


def local_header(name, method, csize, usize, crc):
    n = name.encode()
    return struct.pack("<IHHHHHIIIHH", 0x04034B50, 20, 0, method, 0, 0, crc, csize, usize, len(n), 0) + n


def torchscript_archive(code, data_pkl=None):
    """A torch.jit.save-like archive: code/__torch__.py holding `code`, an empty module's pickles."""
    if data_pkl is None:
        data_pkl = b"\x80\x02c__torch__\nM\n)\x81}(X\x08\x00\x00\x00training\x88ub."
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for n, b in [("data.pkl", data_pkl), ("code/__torch__.py", code.encode()), ("constants.pkl", b"\x80\x02)."),
                     ("version", b"3\n")]:
            z.writestr(zipfile.ZipInfo("ts/" + n), b)
    return buf.getvalue()


def write(out_dir):
    os.makedirs(out_dir, exist_ok=True)
    lines = []
    for name, mode, expect, code, fragment, data in cases():
        with open(os.path.join(out_dir, name), "wb") as f:
            f.write(data)
        lines.append("\t".join([name, mode, expect, code, fragment]))
    with open(os.path.join(out_dir, "manifest.tsv"), "w") as f:
        f.write("\n".join(lines) + "\n")
    return len(lines)


def main():
    warnings.filterwarnings("ignore", "Duplicate name")
    if len(sys.argv) == 3 and sys.argv[1] == "--out":
        print(write(sys.argv[2]), "files in", sys.argv[2])
        return 0
    if len(sys.argv) == 3 and sys.argv[1] == "--run":
        with tempfile.TemporaryDirectory(prefix="tpt-crafted-") as d:
            write(d)
            return subprocess.call([sys.argv[2], d])
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
