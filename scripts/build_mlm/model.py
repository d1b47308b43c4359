"""A small hand-written BERT masked language model in torch, with the parameter names of
a Hugging Face `BertForMaskedLM` checkpoint, so that it loads such checkpoints
(safetensors or pytorch_model.bin, LayerNorm as weight/bias or gamma/beta) without the
`transformers` package, and saves checkpoints that `transformers` could load.

The export form (`ExportMLM`) takes (input_ids, attention_mask, positions) and runs the
output layer on the hidden state at positions[b] of each row b only.
"""
import json
import math
import os

import torch
import torch.nn as nn
import torch.nn.functional as F


class Config:
    def __init__(self, d):
        self.vocab_size = d["vocab_size"]
        self.hidden_size = d["hidden_size"]
        self.num_hidden_layers = d["num_hidden_layers"]
        self.num_attention_heads = d["num_attention_heads"]
        self.intermediate_size = d["intermediate_size"]
        self.max_position_embeddings = d["max_position_embeddings"]
        self.type_vocab_size = d.get("type_vocab_size", 2)
        self.layer_norm_eps = d.get("layer_norm_eps", 1e-12)
        self.hidden_dropout_prob = d.get("hidden_dropout_prob", 0.1)
        self.attention_probs_dropout_prob = d.get("attention_probs_dropout_prob", 0.1)
        self.pad_token_id = d.get("pad_token_id", 0)
        act = d.get("hidden_act", "gelu")
        if act != "gelu":
            raise SystemExit(f"unsupported hidden_act {act!r} (only exact gelu)")
        if d.get("position_embedding_type", "absolute") != "absolute":
            raise SystemExit("only absolute position embeddings are supported")
        self.raw = d


class Embeddings(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.word_embeddings = nn.Embedding(c.vocab_size, c.hidden_size)
        self.position_embeddings = nn.Embedding(c.max_position_embeddings, c.hidden_size)
        self.token_type_embeddings = nn.Embedding(c.type_vocab_size, c.hidden_size)
        self.LayerNorm = nn.LayerNorm(c.hidden_size, eps=c.layer_norm_eps)
        self.dropout = nn.Dropout(c.hidden_dropout_prob)

    def forward(self, input_ids):
        seq = input_ids.shape[1]
        pos = torch.arange(seq, device=input_ids.device).unsqueeze(0)
        # single sentences only: token type 0 everywhere
        x = (self.word_embeddings(input_ids) + self.position_embeddings(pos)
             + self.token_type_embeddings.weight[0])
        return self.dropout(self.LayerNorm(x))


class SelfAttention(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.h = c.num_attention_heads
        self.d = c.hidden_size // c.num_attention_heads
        self.query = nn.Linear(c.hidden_size, c.hidden_size)
        self.key = nn.Linear(c.hidden_size, c.hidden_size)
        self.value = nn.Linear(c.hidden_size, c.hidden_size)
        self.dropout = nn.Dropout(c.attention_probs_dropout_prob)

    def forward(self, x, bias):
        b, s, _ = x.shape

        def split(t):
            return t.view(b, s, self.h, self.d).transpose(1, 2)

        q, k, v = split(self.query(x)), split(self.key(x)), split(self.value(x))
        att = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(self.d) + bias
        att = self.dropout(att.softmax(-1))
        return torch.matmul(att, v).transpose(1, 2).reshape(b, s, self.h * self.d)


class DenseLN(nn.Module):  # "attention.output" and "output"
    def __init__(self, c, din):
        super().__init__()
        self.dense = nn.Linear(din, c.hidden_size)
        self.LayerNorm = nn.LayerNorm(c.hidden_size, eps=c.layer_norm_eps)
        self.dropout = nn.Dropout(c.hidden_dropout_prob)

    def forward(self, h, residual):
        return self.LayerNorm(self.dropout(self.dense(h)) + residual)


class Attention(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.self = SelfAttention(c)
        self.output = DenseLN(c, c.hidden_size)

    def forward(self, x, bias):
        return self.output(self.self(x, bias), x)


class Intermediate(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.dense = nn.Linear(c.hidden_size, c.intermediate_size)

    def forward(self, x):
        return F.gelu(self.dense(x))


class Layer(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.attention = Attention(c)
        self.intermediate = Intermediate(c)
        self.output = DenseLN(c, c.intermediate_size)

    def forward(self, x, bias):
        a = self.attention(x, bias)
        return self.output(self.intermediate(a), a)

    def forward_at(self, x, bias, positions):
        """The layer's output at one position per row ([batch, hidden]): keys and
        values from every position, the query, attention output and feed-forward at
        positions[b] only. The same numbers as forward(x, bias)[b, positions[b]]."""
        sa = self.attention.self
        b, s, hdim = x.shape
        xg = torch.gather(x, 1, positions.view(-1, 1, 1).expand(-1, 1, hdim))  # [b, 1, H]

        def split(t, n):
            return t.view(b, n, sa.h, sa.d).transpose(1, 2)

        q, k, v = split(sa.query(xg), 1), split(sa.key(x), s), split(sa.value(x), s)
        # The query twice: onnxruntime multiplies a one-row matrix with another
        # kernel, whose sums over the (padded) sequence depend on the padding; with
        # two rows it takes the general kernel, and the logits equal the full
        # layer's bit for bit, whatever the padding (checked by export.verify).
        q = torch.cat([q, q], 2)
        att = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(sa.d) + bias
        ctx = torch.matmul(att.softmax(-1), v)[:, :, :1, :]
        ctx = ctx.transpose(1, 2).reshape(b, 1, sa.h * sa.d)
        a = self.attention.output(ctx, xg)
        return self.output(self.intermediate(a), a).squeeze(1)


class Encoder(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.layer = nn.ModuleList([Layer(c) for _ in range(c.num_hidden_layers)])

    def forward(self, x, bias):
        for l in self.layer:
            x = l(x, bias)
        return x


class Bert(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.embeddings = Embeddings(c)
        self.encoder = Encoder(c)

    @staticmethod
    def attention_bias(attention_mask):
        return (1.0 - attention_mask[:, None, None, :].to(torch.float32)) * -10000.0

    def forward(self, input_ids, attention_mask):
        return self.encoder(self.embeddings(input_ids), self.attention_bias(attention_mask))

    def forward_at(self, input_ids, attention_mask, positions):
        """forward(...)[b, positions[b]] ([batch, hidden]), the last layer run at those
        positions only (Layer.forward_at)."""
        bias = self.attention_bias(attention_mask)
        x = self.embeddings(input_ids)
        *first, last = self.encoder.layer
        for layer in first:
            x = layer(x, bias)
        return last.forward_at(x, bias, positions)


class Transform(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.dense = nn.Linear(c.hidden_size, c.hidden_size)
        self.LayerNorm = nn.LayerNorm(c.hidden_size, eps=c.layer_norm_eps)

    def forward(self, h):
        return self.LayerNorm(F.gelu(self.dense(h)))


class Predictions(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.transform = Transform(c)
        self.bias = nn.Parameter(torch.zeros(c.vocab_size))


class Cls(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.predictions = Predictions(c)


class BertForMaskedLM(nn.Module):
    """Decoder weight tied to the word embeddings (as in BERT)."""

    def __init__(self, c):
        super().__init__()
        self.config = c
        self.bert = Bert(c)
        self.cls = Cls(c)

    def head(self, h):
        t = self.cls.predictions.transform(h)
        return F.linear(t, self.bert.embeddings.word_embeddings.weight, self.cls.predictions.bias)

    def hidden(self, input_ids, attention_mask):
        return self.bert(input_ids, attention_mask)

    def forward(self, input_ids, attention_mask):
        return self.head(self.hidden(input_ids, attention_mask))

    # ---- checkpoints in Hugging Face naming ----
    @classmethod
    def from_dir(cls_, d):
        with open(os.path.join(d, "config.json")) as f:
            c = Config(json.load(f))
        m = cls_(c)
        sd = load_state_dict(d)
        m.load_hf_state_dict(sd)
        return m

    def load_hf_state_dict(self, sd):
        fixed = {}
        for k, v in sd.items():
            k = k.replace("LayerNorm.gamma", "LayerNorm.weight").replace("LayerNorm.beta", "LayerNorm.bias")
            fixed[k] = v
        emb = fixed.get("bert.embeddings.word_embeddings.weight")
        dec = fixed.pop("cls.predictions.decoder.weight", None)
        if dec is not None and emb is not None and not torch.equal(dec, emb):
            raise SystemExit("decoder weight is not tied to the word embeddings: unsupported")
        fixed.pop("cls.predictions.decoder.bias", None)
        own = self.state_dict()
        missing = [k for k in own if k not in fixed]
        if missing:
            raise SystemExit(f"checkpoint lacks {missing[:5]}")
        ignored = sorted(k for k in fixed if k not in own)
        self.load_state_dict({k: fixed[k] for k in own})
        return ignored

    def save_dir(self, d):
        from safetensors.torch import save_file
        os.makedirs(d, exist_ok=True)
        sd = {k: v.detach().contiguous().clone() for k, v in self.state_dict().items()}
        save_file(sd, os.path.join(d, "model.safetensors"), metadata={"format": "pt"})
        raw = dict(self.config.raw)
        raw["architectures"] = ["BertForMaskedLM"]
        raw["tie_word_embeddings"] = True
        with open(os.path.join(d, "config.json"), "w") as f:
            json.dump(raw, f, indent=2)


def load_state_dict(d):
    st = os.path.join(d, "model.safetensors")
    if os.path.exists(st):
        from safetensors.torch import load_file
        return load_file(st)
    pb = os.path.join(d, "pytorch_model.bin")
    if os.path.exists(pb):
        return torch.load(pb, map_location="cpu", weights_only=True)
    raise SystemExit(f"no model.safetensors or pytorch_model.bin in {d}")


class ExportMLM(nn.Module):
    """(input_ids, attention_mask, positions) -> logits at positions[b] of row b."""

    def __init__(self, m):
        super().__init__()
        self.m = m
        # The decoder gets its own, pre-transposed copy of the tied embedding matrix:
        # one initializer shared by Gather and MatMul breaks onnxruntime's dynamic
        # quantization (it rewrites the shared tensor for one of the two uses).
        self.decoder_t = nn.Parameter(
            m.bert.embeddings.word_embeddings.weight.detach().t().contiguous().clone(),
            requires_grad=False)

    def forward(self, input_ids, attention_mask, positions):
        # Only positions[b] of the last layer is read: that layer runs its query,
        # attention output and feed-forward there alone (1.26x faster on the
        # default model's 64-row calls, the mlm_calls benchmark; the same logits
        # bit for bit).
        g = self.m.bert.forward_at(input_ids, attention_mask, positions)  # [batch, hidden]
        t = self.m.cls.predictions.transform(g)
        return torch.matmul(t, self.decoder_t) + self.m.cls.predictions.bias  # [batch, vocab]
