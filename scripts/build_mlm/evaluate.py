"""Quality checks: the NDD metric on the paper's eight case pairs, and held-out
fill-mask accuracy. Both run through a `logits_fn(input_ids, attention_mask, positions)`
returning float32 [batch, vocab] numpy logits, so the same code scores the torch model
and the exported ONNX file through onnxruntime.

NDD (neighbouring distribution divergence) as computed here:
  W = the original sentence's subword ids with [CLS] ... [SEP]; span = the subword
  positions i..j (inclusive) of the replaced words in W; W' = the edited sentence, whose
  replacement occupies i..j' (j' = i + len(V) - 1). For every position k of W outside
  i..j that is not [CLS]/[SEP]: k' = k for k < i and k' = k + (j' - j) for k > j;
  P = softmax(MLM(W with k masked))[k], P' = softmax(MLM(W' with k' masked))[k'];
  div_k = KL(P' || P) = sum_v P'(v) (log P'(v) - log P(v));
  NDD = sum_k mu^d(k) div_k, mu = 0.9, d(k) = i - k for k < i and k - j for k > j,
  i.e. the distance in W's subword positions to the nearer end of the span (the nearest
  neighbours get weight 0.9, the next 0.81, ...).
"""
import json
import random

import numpy as np

MU = 0.9

PAIRS = [
    {"label": "PER",
     "original": "Masao Yoshikawa was defeated in the match in Hokkaido .",
     "fitting": "Cobb Hero was defeated in the match in Hokkaido .",
     "unfitting": "Eventually Blackpool was defeated in the match in Hokkaido .",
     "span_original": "Masao Yoshikawa", "span_fitting": "Cobb Hero",
     "span_unfitting": "Eventually Blackpool"},
    {"label": "LOC",
     "original": "Masao Yoshikawa was defeated in the match in Hokkaido .",
     "fitting": "Masao Yoshikawa was defeated in the match in Moscow .",
     "unfitting": "Masao Yoshikawa was defeated in the match in 1926 .",
     "span_original": "Hokkaido", "span_fitting": "Moscow", "span_unfitting": "1926"},
    {"label": "ORG",
     "original": "The World Trade Organization deals with the global rules of trade between nations.",
     "fitting": "The Swedish Technical Centre deals with the global rules of trade between nations.",
     "unfitting": "The underlying principles agree deals with the global rules of trade between nations.",
     "span_original": "World Trade Organization", "span_fitting": "Swedish Technical Centre",
     "span_unfitting": "underlying principles agree"},
    {"label": "MISC",
     "original": "The organization admitted Russian as an official language in 2006 .",
     "fitting": "The organization admitted Indonesian as an official language in 2006 .",
     "unfitting": "The organization admitted efforts as an official language in 2006 .",
     "span_original": "Russian", "span_fitting": "Indonesian", "span_unfitting": "efforts"},
    {"label": "NP",
     "original": "Big Bear doesn't care for disposable diapers, which aren't biodegradable.",
     "fitting": "Big Bear doesn't care for Democrats, which aren't biodegradable.",
     "unfitting": "Big Bear doesn't care for an election, which aren't biodegradable.",
     "span_original": "disposable diapers", "span_fitting": "Democrats",
     "span_unfitting": "an election"},
    {"label": "VP",
     "original": "Prices in Brussels, where a computer breakdown disrupted trading, also tumbled.",
     "fitting": "Prices in Brussels, where a computer breakdown disrupted trading, also surged.",
     "unfitting": "Prices in Brussels, where a computer breakdown disrupted trading, also go.",
     "span_original": "tumbled", "span_fitting": "surged", "span_unfitting": "go"},
    {"label": "ADJP",
     "original": "\"Everybody was still confident, including most institutional investors.",
     "fitting": "\"Everybody was still pleased, including most institutional investors.",
     "unfitting": "\"Everybody was still $15 million, including most institutional investors.",
     "span_original": "confident", "span_fitting": "pleased", "span_unfitting": "$15 million"},
    {"label": "ADVP",
     "original": "They went a collective 5-for-24 here, with zero homers and ribbies.",
     "fitting": "They went a collective 5-for-24 right now, with zero homers and ribbies.",
     "unfitting": "They went a collective 5-for-24 back, with zero homers and ribbies.",
     "span_original": "here", "span_fitting": "right now", "span_unfitting": "back"},
]
PAPER_SOURCE = ("Semantics-Preserved Distortion for Personal Privacy Protection in "
                "Federated Learning, Figures 2 and 3 (selected = fitting)")


def char_span(sentence, span):
    """Offset of the span: its first occurrence at word boundaries."""
    import re
    m = re.search(r"(?<!\w)" + re.escape(span) + r"(?!\w)", sentence)
    if not m:
        raise SystemExit(f"span {span!r} not in {sentence!r}")
    return m.start(), m.end()


def encode_span(tok, sentence, span):
    enc = tok.encode(sentence)
    cs, ce = char_span(sentence, span)
    pos = [t for t, (s, e) in enumerate(enc.offsets)
           if enc.special_tokens_mask[t] == 0 and s < ce and e > cs]
    assert pos == list(range(pos[0], pos[-1] + 1)), (sentence, span, pos)
    return np.array(enc.ids, dtype=np.int64), pos[0], pos[-1], enc


def log_softmax(x):
    x = x.astype(np.float64)
    x = x - x.max(-1, keepdims=True)
    return x - np.log(np.exp(x).sum(-1, keepdims=True))


def masked_logprobs(logits_fn, ids, positions, mask_id):
    """log-softmax at each position k (given), with k replaced by [MASK]."""
    rows = np.repeat(ids[None, :], len(positions), 0)
    rows[np.arange(len(positions)), positions] = mask_id
    att = np.ones_like(rows)
    return log_softmax(logits_fn(rows, att, np.array(positions, dtype=np.int64)))


def ndd(logits_fn, tok, mask_id, original, span_o, edited, span_e, detail=False):
    w, i, j, _ = encode_span(tok, original, span_o)
    w2, i2, j2, _ = encode_span(tok, edited, span_e)
    assert i2 == i, "the edit must start at the same subword position"
    shift = j2 - j
    n = len(w)
    ks = [k for k in range(1, n - 1) if k < i or k > j]      # 0 = [CLS], n-1 = [SEP]
    k2 = [k if k < i else k + shift for k in ks]
    lp = masked_logprobs(logits_fn, w, ks, mask_id)
    lq = masked_logprobs(logits_fn, w2, k2, mask_id)
    div = (np.exp(lq) * (lq - lp)).sum(-1)
    wts = np.array([MU ** (i - k if k < i else k - j) for k in ks])
    total = float((wts * div).sum())
    if detail:
        return total, list(zip(ks, k2, wts.tolist(), div.tolist()))
    return total


def paper_pairs(logits_fn, tok, mask_id, verbose=True):
    out = []
    right = 0
    for p in PAIRS:
        f = ndd(logits_fn, tok, mask_id, p["original"], p["span_original"],
                p["fitting"], p["span_fitting"])
        u = ndd(logits_fn, tok, mask_id, p["original"], p["span_original"],
                p["unfitting"], p["span_unfitting"])
        ok = f < u
        right += ok
        out.append({"label": p["label"], "fitting": f, "unfitting": u, "ok": bool(ok)})
        if verbose:
            print(f"  {p['label']:5s} fitting {f:8.4f}  unfitting {u:8.4f}  "
                  f"{'ok' if ok else 'WRONG'}", flush=True)
    return right, out


def heldout_items(tok, sentences, seed=4321, max_len=48):
    """One masked subword per held-out sentence, chosen with the seed among the
    non-special positions of the sentence (truncated to max_len subwords)."""
    rng = random.Random(seed)
    items = []
    for s in sentences:
        enc = tok.encode(s)
        ids = enc.ids[: max_len - 1] + [enc.ids[-1]] if len(enc.ids) > max_len else enc.ids
        cand = list(range(1, len(ids) - 1))
        if not cand:
            raise SystemExit(f"held-out sentence without a subword: {s!r}")
        items.append((np.array(ids, dtype=np.int64), rng.choice(cand)))
    return items


def fill_mask(logits_fn, items, mask_id, batch=64):
    top1 = top10 = 0
    for b in range(0, len(items), batch):
        chunk = items[b:b + batch]
        L = max(len(ids) for ids, _ in chunk)
        x = np.zeros((len(chunk), L), dtype=np.int64)
        a = np.zeros((len(chunk), L), dtype=np.int64)
        pos = np.zeros(len(chunk), dtype=np.int64)
        gold = np.zeros(len(chunk), dtype=np.int64)
        for r, (ids, k) in enumerate(chunk):
            x[r, :len(ids)] = ids
            a[r, :len(ids)] = 1
            gold[r] = ids[k]
            x[r, k] = mask_id
            pos[r] = k
        lg = logits_fn(x, a, pos)
        top = np.argsort(-lg, axis=-1)[:, :10]
        top1 += int((top[:, 0] == gold).sum())
        top10 += int((top == gold[:, None]).any(-1).sum())
    n = len(items)
    return top1 / n, top10 / n


def torch_logits_fn(model):
    import torch
    from .model import ExportMLM
    em = ExportMLM(model).eval()

    def fn(x, a, p):
        with torch.no_grad():
            return em(torch.from_numpy(x), torch.from_numpy(a), torch.from_numpy(p)).numpy()
    return fn


def torch_full_logits_fn(model):
    """The plain masked LM (every layer on every position), read at positions[b]: the
    reference that ExportMLM's shortcut in the last layer must reproduce."""
    import torch

    def fn(x, a, p):
        with torch.no_grad():
            out = model(torch.from_numpy(x), torch.from_numpy(a))
            return out[torch.arange(len(p)), torch.from_numpy(p)].numpy()
    return fn


def ort_logits_fn(path):
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.intra_op_num_threads = 2
    sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])

    def fn(x, a, p):
        return sess.run(["logits"], {"input_ids": x, "attention_mask": a, "positions": p})[0]
    return fn


def write_pairs_json(path, results, tok):
    """The pairs with character offsets of the spans (first occurrence at word
    boundaries, [start, end) in Python str indices = Unicode scalar values; the sentences
    are ASCII so they are byte offsets too), the subword positions of the spans
    ([first, last], inclusive, [CLS] = 0), the subword tokens, and this model's NDD."""
    rows = []
    for p, r in zip(PAIRS, results):
        d = dict(p)
        for which in ("original", "fitting", "unfitting"):
            s, e = char_span(p[which], p["span_" + which])
            d["span_" + which + "_chars"] = [s, e]
            _, i, j, enc = encode_span(tok, p[which], p["span_" + which])
            d["span_" + which + "_subwords"] = [i, j]
            d["tokens_" + which] = enc.tokens
        d["ndd_reference"] = {"fitting": round(r["fitting"], 6),
                              "unfitting": round(r["unfitting"], 6)}
        rows.append(d)
    with open(path, "w") as f:
        json.dump(rows, f, indent=1, ensure_ascii=False)
        f.write("\n")
