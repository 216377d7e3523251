"""A Hugging Face VideoMAE folder from the videomae_tiny_hf fixture, for the
CLI tests: the fixture's "weights." tensors under their transformers names in
config.json + model.safetensors (model), as two shards with
model.safetensors.index.json (sharded), or with a classification head
(fc_norm, classifier) whose weights are a fixed pattern (classification).
Standard library only.
Usage: make_videomae_folder.py FIXTURE.safetensors OUT_DIR model|sharded|classification
"""
import json
import os
import struct
import sys

# configs/videomae_tiny_hf.yaml, as transformers writes it (defaults left out).
CONFIG = {"model_type": "videomae", "hidden_size": 192, "num_hidden_layers": 4, "num_attention_heads": 3,
          "intermediate_size": 768, "use_mean_pooling": True}
LABELS = ["idle", "cut", "clip"]


def read_safetensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    header.pop("__metadata__", None)
    return {k: (v["dtype"], v["shape"], data[v["data_offsets"][0]:v["data_offsets"][1]]) for k, v in header.items()}


def write_safetensors(path, tensors):
    header, blobs, offset = {}, [], 0
    for name, (dtype, shape, blob) in tensors.items():
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + len(blob)]}
        blobs.append(blob)
        offset += len(blob)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def f32(values, shape):
    return ("F32", shape, struct.pack("<%df" % len(values), *values))


def main(fixture, out_dir, kind):
    tensors = {k[len("weights."):]: v for k, v in read_safetensors(fixture).items() if k.startswith("weights.")}
    config = dict(CONFIG, architectures=["VideoMAEModel"])
    if kind == "classification":
        d = CONFIG["hidden_size"]
        tensors = {"videomae." + k: v for k, v in tensors.items()}
        tensors["fc_norm.weight"] = f32([1.0] * d, [d])
        tensors["fc_norm.bias"] = f32([0.0] * d, [d])
        tensors["classifier.weight"] = f32([((i * 7 + j * 3) % 11 - 5) / 16 for i in range(len(LABELS)) for j in range(d)],
                                           [len(LABELS), d])
        tensors["classifier.bias"] = f32([0.0] * len(LABELS), [len(LABELS)])
        config.update(architectures=["VideoMAEForVideoClassification"], id2label={str(i): n for i, n in enumerate(LABELS)})
    os.makedirs(out_dir, exist_ok=True)
    if kind == "sharded":  # as save_pretrained(max_shard_size=...) writes them
        names = sorted(tensors)
        shards = {"model-00001-of-00002.safetensors": names[:len(names) // 2],
                  "model-00002-of-00002.safetensors": names[len(names) // 2:]}
        for file, part in shards.items():
            write_safetensors(os.path.join(out_dir, file), {n: tensors[n] for n in part})
        index = {"metadata": {}, "weight_map": {n: f for f, part in shards.items() for n in part}}
        with open(os.path.join(out_dir, "model.safetensors.index.json"), "w") as f:
            json.dump(index, f)
    else:
        write_safetensors(os.path.join(out_dir, "model.safetensors"), tensors)
    with open(os.path.join(out_dir, "config.json"), "w") as f:
        json.dump(config, f, indent=2)


if __name__ == "__main__":
    if len(sys.argv) != 4 or sys.argv[3] not in ("model", "sharded", "classification"):
        sys.exit(__doc__)
    main(*sys.argv[1:])
