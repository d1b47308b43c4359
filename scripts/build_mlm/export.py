"""Export a BERT masked LM checkpoint (Hugging Face layout: config.json +
model.safetensors or pytorch_model.bin + tokenizer.json or vocab.txt) to the dptext
ONNX contract:

  inputs : input_ids      int64 [batch, seq]
           attention_mask int64 [batch, seq]   (1 = token, 0 = padding)
           positions      int64 [batch]        (the one position per row to predict)
  output : logits         float32 [batch, vocab]  (MLM logits at positions[b] of row b)

Token type ids are not an input: every token gets token type 0 (single sentences).
The output layer (transform + tied decoder) runs on the gathered hidden states only,
and so do the last layer's attention query, attention output and feed-forward.
"""
import json
import os
import shutil
import time

import numpy as np
import torch

from .model import BertForMaskedLM, ExportMLM

OPSET = 17
TOLERANCE = 1e-3   # max |logit difference| allowed between torch and ONNX (fp32)


def tokenizer_for(ckpt_dir):
    """Returns (tokenizers.Tokenizer, lowercase)."""
    from tokenizers import Tokenizer
    tj = os.path.join(ckpt_dir, "tokenizer.json")
    tcfg = {}
    p = os.path.join(ckpt_dir, "tokenizer_config.json")
    if os.path.exists(p):
        with open(p) as f:
            tcfg = json.load(f)
    if os.path.exists(tj):
        tok = Tokenizer.from_file(tj)
        norm = json.loads(tok.to_str()).get("normalizer") or {}
        lowercase = bool(norm.get("lowercase", tcfg.get("do_lower_case", False)))
    else:
        from tokenizers import BertWordPieceTokenizer
        lowercase = bool(tcfg.get("do_lower_case", True))
        bw = BertWordPieceTokenizer(os.path.join(ckpt_dir, "vocab.txt"), lowercase=lowercase,
                                    strip_accents=tcfg.get("strip_accents"))
        tok = Tokenizer.from_str(bw._tokenizer.to_str())
    tok.no_padding()
    return tok, lowercase


def write_tokenizer(tok, path, max_len):
    tok = type(tok).from_str(tok.to_str())
    tok.no_padding()
    tok.enable_truncation(max_len)
    tok.save(path)
    d = json.load(open(path))
    pp = d.get("post_processor") or {}
    if pp.get("type") not in ("TemplateProcessing", "BertProcessing"):
        raise SystemExit(f"tokenizer post-processor {pp.get('type')!r} does not add [CLS]/[SEP]")
    return tok


def export_onnx(model, path, log=print):
    em = ExportMLM(model).eval()
    x = torch.tensor([[101, 2023, 103, 2003, 102], [101, 2023, 2003, 102, 0]], dtype=torch.long)
    a = (x != 0).long()
    p = torch.tensor([2, 1], dtype=torch.long)
    t0 = time.time()
    torch.onnx.export(
        em, (x, a, p), path, dynamo=False, opset_version=OPSET, do_constant_folding=True,
        input_names=["input_ids", "attention_mask", "positions"], output_names=["logits"],
        dynamic_axes={"input_ids": {0: "batch", 1: "seq"},
                      "attention_mask": {0: "batch", 1: "seq"},
                      "positions": {0: "batch"}, "logits": {0: "batch"}})
    import onnx
    m = onnx.load(path)
    onnx.checker.check_model(m)
    m.producer_name = "dptext scripts/build-mlm"
    onnx.save(m, path)
    log(f"[export] wrote {path} ({os.path.getsize(path) / 1e6:.1f} MB) in {time.time() - t0:.1f}s")


def test_inputs(tok, mask_id, sentences, seed=7):
    """A padded batch with mixed lengths and one masked position per row."""
    rng = np.random.default_rng(seed)
    encs = [tok.encode(s).ids for s in sentences]
    L = max(len(e) for e in encs)
    x = np.zeros((len(encs), L), dtype=np.int64)
    a = np.zeros_like(x)
    pos = np.zeros(len(encs), dtype=np.int64)
    for r, e in enumerate(encs):
        x[r, :len(e)] = e
        a[r, :len(e)] = 1
        k = int(rng.integers(1, len(e) - 1))
        x[r, k] = mask_id
        pos[r] = k
    return x, a, pos


def verify(ckpt_dir, onnx_path, tok, mask_id, sentences, log=print):
    """Fresh torch model from the checkpoint vs onnxruntime on the fp32 file."""
    from . import evaluate as ev
    fresh = BertForMaskedLM.from_dir(ckpt_dir).eval()
    tfn = ev.torch_logits_fn(fresh)
    full = ev.torch_full_logits_fn(fresh)
    ofn = ev.ort_logits_fn(onnx_path)
    worst = 0.0
    for b in range(0, len(sentences), 16):
        x, a, p = test_inputs(tok, mask_id, sentences[b:b + 16], seed=b)
        o = ofn(x, a, p)
        # against the exported module and against the plain model (all layers on
        # all positions): the last layer's shortcut must not change the result
        worst = max(worst, float(np.abs(tfn(x, a, p) - o).max()),
                    float(np.abs(full(x, a, p) - o).max()))
    # a row alone must give the same logits, bit for bit, as inside a batch padded
    # by 1 to 32 tokens (the Rust side pads a call by up to about 32; NDD must not
    # depend on the batching): every row of 8 sentences
    x, a, p = test_inputs(tok, mask_id, sentences[:8])
    pad_diff = 0.0
    for r in range(len(x)):
        n = int(a[r].sum())
        alone = ofn(x[r:r + 1, :n], a[r:r + 1, :n], p[r:r + 1])[0]
        for extra in range(1, 33):
            xb = np.zeros((len(x), n + extra), dtype=np.int64)
            ab = np.zeros_like(xb)
            m = min(x.shape[1], n + extra)
            xb[:, :m], ab[:, :m] = x[:, :m], a[:, :m]
            xb[r, n:], ab[r, n:] = 0, 0
            # rows cut by the narrower batch lose their [SEP]; only row r is compared
            out = ofn(xb, ab, np.minimum(p, n + extra - 1))
            pad_diff = max(pad_diff, float(np.abs(out[r] - alone).max()))
    log(f"[export] torch vs onnxruntime max |logit diff| {worst:.2e} (tolerance {TOLERANCE}); "
        f"padded-vs-alone max diff {pad_diff:.2e}")
    if worst > TOLERANCE or pad_diff != 0.0:
        raise SystemExit("export verification failed")
    return worst, pad_diff


def quantize(fp32_path, int8_path, log=print):
    from onnxruntime.quantization import QuantType, quantize_dynamic
    t0 = time.time()
    quantize_dynamic(fp32_path, int8_path, weight_type=QuantType.QInt8, per_channel=False)
    log(f"[export] int8 dynamic quantization: {int8_path} "
        f"({os.path.getsize(int8_path) / 1e6:.1f} MB) in {time.time() - t0:.1f}s")


def config_json(model, tok, lowercase, quantized):
    c = model.config
    ids = {t: tok.token_to_id(t) for t in ("[MASK]", "[CLS]", "[SEP]", "[PAD]", "[UNK]")}
    return {
        "vocab_size": c.vocab_size,
        "max_position_embeddings": c.max_position_embeddings,
        "hidden_size": c.hidden_size,
        "num_layers": c.num_hidden_layers,
        "num_attention_heads": c.num_attention_heads,
        "mask_token": "[MASK]",
        "mask_token_id": ids["[MASK]"],
        "cls_token_id": ids["[CLS]"],
        "sep_token_id": ids["[SEP]"],
        "pad_token_id": ids["[PAD]"],
        "unk_token_id": ids["[UNK]"],
        "lowercase": lowercase,
        "positions_input": True,
        "token_type_ids": False,
        "inputs": ["input_ids", "attention_mask", "positions"],
        "output": "logits",
        "weights": "int8 (onnxruntime dynamic quantization)" if quantized else "fp32",
        "opset": OPSET,
    }


def score(path, tok, mask_id, items, log=print, name="", natural=None):
    from . import evaluate as ev
    fn = ev.ort_logits_fn(path)
    t0 = time.time()
    right, res = ev.paper_pairs(fn, tok, mask_id)
    out = {"file": os.path.basename(path), "bytes": os.path.getsize(path),
           "pairs_right": right, "pairs": res}
    msg = ""
    if items:
        out["fill_top1"], out["fill_top10"] = ev.fill_mask(fn, items, mask_id)
        msg += (f"; held-out fill-mask top-1 {out['fill_top1']:.4f} top-10 "
                f"{out['fill_top10']:.4f} ({len(items)} sentences)")
    if natural:
        out["fill_natural_top1"], out["fill_natural_top10"] = ev.fill_mask(fn, natural, mask_id)
        out["fill_natural_n"] = len(natural)
        msg += (f"; without template sentences top-1 {out['fill_natural_top1']:.4f} top-10 "
                f"{out['fill_natural_top10']:.4f} ({len(natural)} sentences)")
    log(f"[eval] {name}: paper pairs {right}/8 ranked right{msg} ({time.time() - t0:.1f}s)")
    return out


def export_dir(ckpt_dir, out_dir, quant="no", heldout=None, log=print, heldout_sources=None):
    """The `export` subcommand and the last stage of the build: checkpoint directory ->
    model.onnx, tokenizer.json, config.json, paper_pairs.json in out_dir.
    quant: "no" (fp32), "yes" (int8), "auto" (int8 if it ranks at least as many paper
    pairs right as fp32 and loses at most 1.0 point of held-out top-1 and top-10) or
    "report" (int8 quantized and scored for the record, fp32 kept: the build's choice,
    because dynamic quantization computes activation scales per batch, so a row's
    distribution would depend on the other rows of its batch, and NDD must not).
    heldout: sentences for the fill-mask check (optional); heldout_sources: the source of
    each, to score the sentences that are not from templates separately (optional)."""
    from . import evaluate as ev
    torch.set_num_threads(2)
    os.makedirs(out_dir, exist_ok=True)
    model = BertForMaskedLM.from_dir(ckpt_dir).eval()
    tok, lowercase = tokenizer_for(ckpt_dir)
    if tok.get_vocab_size() != model.config.vocab_size:
        log(f"[export] note: tokenizer has {tok.get_vocab_size()} entries, model "
            f"{model.config.vocab_size}")
    mask_id = tok.token_to_id("[MASK]")
    tok = write_tokenizer(tok, os.path.join(out_dir, "tokenizer.json"),
                          model.config.max_position_embeddings)
    items = ev.heldout_items(tok, heldout) if heldout else None
    natural = None
    if heldout and heldout_sources:
        natural = [it for it, src in zip(items, heldout_sources) if src != "templates"]
    fp32 = os.path.join(out_dir, "model.fp32.onnx")
    export_onnx(model, fp32, log)
    sentences = [p[w] for p in ev.PAIRS for w in ("original", "fitting", "unfitting")]
    sentences += list(heldout[:64]) if heldout else []
    worst, pad_diff = verify(ckpt_dir, fp32, tok, mask_id, sentences, log)
    report = {"max_abs_diff": worst, "pad_diff": pad_diff, "tolerance": TOLERANCE,
              "fp32": score(fp32, tok, mask_id, items, log, "fp32 ONNX", natural)}
    final = os.path.join(out_dir, "model.onnx")
    use_int8 = quant == "yes"
    if quant in ("yes", "auto", "report"):
        int8 = os.path.join(out_dir, "model.int8.onnx")
        quantize(fp32, int8, log)
        report["int8"] = score(int8, tok, mask_id, items, log, "int8 ONNX", natural)
        if quant == "auto":
            f, q = report["fp32"], report["int8"]
            use_int8 = q["pairs_right"] >= f["pairs_right"] and (
                not items or (q["fill_top1"] >= f["fill_top1"] - 0.01
                              and q["fill_top10"] >= f["fill_top10"] - 0.01))
            log(f"[export] quantization kept quality: {use_int8}")
        if use_int8:
            os.replace(int8, final)
            os.remove(fp32)
        else:
            os.remove(int8)
    if not use_int8:
        os.replace(fp32, final)
    report["final"] = "int8" if use_int8 else "fp32"
    report["final_scores"] = report["int8" if use_int8 else "fp32"]
    with open(os.path.join(out_dir, "config.json"), "w") as f:
        json.dump(config_json(model, tok, lowercase, use_int8), f, indent=1)
        f.write("\n")
    # the final file, freshly loaded, gives the reference NDD values
    res = score(final, tok, mask_id, None, log, "final model.onnx")
    ev.write_pairs_json(os.path.join(out_dir, "paper_pairs.json"), res["pairs"], tok)
    report["final_pairs_right"] = res["pairs_right"]
    return report
