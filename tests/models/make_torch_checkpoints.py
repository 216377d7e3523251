"""Writes the PyTorch checkpoints test_checkpoint.cpp reads, into OUT_DIR.

Run with Debian's /usr/bin/python3 (python3-torch 1.13). Each NAME.pt comes
with NAME.expected.safetensors: the tensors the loader must return, under the
names it must give them, contiguous, written by a minimal safetensors writer
here (no safetensors package needed). Hostile files are written with raw
pickle opcodes or a __reduce__ that is pickled, never run: nothing here loads
a pickle. Usage: make_torch_checkpoints.py OUT_DIR MARKER_PATH
"""
import collections
import io
import json
import os
import pickle
import struct
import subprocess
import sys
import zipfile

import torch

out, marker = sys.argv[1], sys.argv[2]
os.makedirs(out, exist_ok=True)
torch.manual_seed(0)

ST_DTYPES = {torch.float32: "F32", torch.float64: "F64", torch.float16: "F16", torch.bfloat16: "BF16",
             torch.int64: "I64", torch.int32: "I32", torch.int16: "I16", torch.int8: "I8", torch.uint8: "U8",
             torch.bool: "BOOL"}


def tensor_bytes(t):
    t = t.detach().contiguous()
    if t.dtype == torch.bfloat16:
        t = t.view(torch.int16)  # numpy has no bfloat16; same bytes
    return t.numpy().tobytes()


def save_safetensors(path, tensors):
    header, blobs, offset = {}, [], 0
    for name in sorted(tensors):
        b = tensor_bytes(tensors[name])
        header[name] = {"dtype": ST_DTYPES[tensors[name].dtype], "shape": list(tensors[name].shape),
                        "data_offsets": [offset, offset + len(b)]}
        blobs.append(b)
        offset += len(b)
    j = json.dumps(header).encode()
    j += b" " * ((8 - len(j) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(j)) + j + b"".join(blobs))


def case(name, obj, expected):
    torch.save(obj, os.path.join(out, name + ".pt"))
    save_safetensors(os.path.join(out, name + ".expected.safetensors"), expected)


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 3)
        self.bn = torch.nn.BatchNorm2d(4)  # num_batches_tracked: a zero-dim int64 buffer
        self.head = torch.nn.Linear(4, 2)


net = Net()
optim = torch.optim.AdamW(net.parameters(), lr=1e-3)
net.head(torch.randn(2, 4)).sum().backward()
optim.step()  # moments: tensors outside the state dict
sd = net.state_dict()  # an OrderedDict with _metadata set through BUILD
case("flat", sd, dict(sd))
case("nested", {"state_dict": sd, "epoch": 3, "lr": 0.1, "arch": "net", "best": None, "done": True}, dict(sd))
case("model_optim", {"model": sd, "optimizer": optim.state_dict(), "epoch": 2}, dict(sd))
case("module_prefix", collections.OrderedDict(("module." + k, v) for k, v in sd.items()), dict(sd))

dtypes = {
    "f16": torch.randn(3, 5).half(), "bf16": torch.randn(4, 2).bfloat16(), "f64": torch.randn(6).double(),
    "i64": torch.arange(-7, 8), "i32": torch.arange(0, 12, dtype=torch.int32).view(3, 4),
    "i16": torch.arange(-3, 3, dtype=torch.int16), "i8": torch.arange(-4, 4, dtype=torch.int8),
    "u8": torch.arange(0, 250, 9, dtype=torch.uint8), "bool": torch.rand(11) > 0.5,
    "zero_dim": torch.tensor(2.5), "empty": torch.zeros(0, 3), "big_int": torch.tensor([2**62, -2**62]),
}
case("dtypes", dtypes, dtypes)

base = torch.arange(48, dtype=torch.float32)
views = {"base": base, "slice": base[5:17], "transposed": base[:24].view(4, 6).t(), "step": base[1::7],
         "row": base.view(6, 8)[3], "col": base.view(6, 8)[:, 2], "expanded": base[:3].view(3, 1).expand(3, 4)}
case("views", views, {k: v.contiguous() for k, v in views.items()})

params = {"w": torch.nn.Parameter(torch.randn(3, 3)), "frozen": torch.nn.Parameter(torch.ones(2), requires_grad=False)}
case("params", params, {k: v.data for k, v in params.items()})

nested_dicts = {"encoder": {"layer": {"0": {"w": torch.ones(2)}, "1": {"w": torch.zeros(2)}}},
                "blocks": [torch.full((2,), 7.0), {"b": torch.eye(2)}], "steps": 10}
case("deep", nested_dicts, {"encoder.layer.0.w": torch.ones(2), "encoder.layer.1.w": torch.zeros(2),
                            "blocks.0": torch.full((2,), 7.0), "blocks.1.b": torch.eye(2)})

# Hugging Face's sharded .bin checkpoints: pytorch_model.bin.index.json -> shards.
keys = sorted(sd)
shards = {"pytorch_model-00001-of-00002.bin": keys[:4], "pytorch_model-00002-of-00002.bin": keys[4:]}
for shard, names in shards.items():
    torch.save({k: sd[k] for k in names}, os.path.join(out, shard))
with open(os.path.join(out, "pytorch_model.bin.index.json"), "w") as f:
    json.dump({"metadata": {}, "weight_map": {k: shard for shard, names in shards.items() for k in names}}, f)

# Formats refused with a conversion hint.
torch.save({"w": torch.ones(2)}, os.path.join(out, "legacy.pt"), _use_new_zipfile_serialization=False)
torch.jit.save(torch.jit.script(torch.nn.Linear(2, 2)), os.path.join(out, "scripted.pt"))


# Hostile files: __reduce__ is only called to pickle; what it returns is written, not run.
class Hostile:
    def __init__(self, fn, args):
        self.fn, self.args = fn, args

    def __reduce__(self):
        return self.fn, self.args


for name, fn, args in [("os_system", os.system, ("touch " + marker,)),
                       ("eval", eval, ("open(%r, 'w').close()" % marker,)),
                       ("popen", subprocess.Popen, (["touch", marker],))]:
    torch.save({"w": torch.ones(2), "payload": Hostile(fn, args)}, os.path.join(out, "hostile_%s.pt" % name))


def write_archive(path, data_pkl, records=None, byteorder=None, name="archive"):
    """A torch.save-like zip from raw parts (stored entries, no alignment padding)."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as z:
        z.writestr(name + "/data.pkl", data_pkl)
        if byteorder is not None:
            z.writestr(name + "/byteorder", byteorder)
        for key, blob in (records or {}).items():
            z.writestr(name + "/data/" + key, blob)
        z.writestr(name + "/version", "3\n")


class FakeStorage:
    def __init__(self, storage_type, key, numel):
        self.pid = ("storage", storage_type, key, "cpu", numel)


class TensorPickler(pickle.Pickler):
    def persistent_id(self, obj):
        return obj.pid if isinstance(obj, FakeStorage) else None


def crafted_tensor(storage, offset, size, stride):
    return Hostile(torch._utils._rebuild_tensor_v2, (storage, offset, size, stride, False, collections.OrderedDict()))


def pickled(obj):
    buf = io.BytesIO()
    TensorPickler(buf, protocol=2).dump(obj)
    return buf.getvalue()


floats = struct.pack("<4f", 1, 2, 3, 4)
s4 = FakeStorage(torch.FloatStorage, "0", 4)
write_archive(os.path.join(out, "extent.pt"), pickled({"w": crafted_tensor(s4, 2, (3,), (1,))}), {"0": floats})
write_archive(os.path.join(out, "short_storage.pt"), pickled({"w": crafted_tensor(s4, 0, (4,), (1,))}),
              {"0": floats[:12]})
write_archive(os.path.join(out, "unaligned.pt"), pickled({"w": crafted_tensor(s4, 1, (2,), (2,))}), {"0": floats},
              name="some_model")
big = struct.pack(">4f", 1, 2, 3, 4)
write_archive(os.path.join(out, "big_endian.pt"), pickled({"w": crafted_tensor(s4, 0, (2, 2), (2, 1))}), {"0": big},
              byteorder="big")
write_archive(os.path.join(out, "huge_length.pt"), b"\x80\x02X\xff\xff\xff\x7fabc")
write_archive(os.path.join(out, "raw_posix.pt"), b"\x80\x02cposix\nsystem\nX\x05\x00\x00\x00touch\x85R.")
write_archive(os.path.join(out, "no_stop.pt"), b"\x80\x02}q\x00")
