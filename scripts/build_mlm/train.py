"""Continue masked-language-model training of the small BERT on the corpus (CPU)."""
import json
import math
import os
import random
import time

import numpy as np
import torch
import torch.nn.functional as F

from . import evaluate as ev
from .model import BertForMaskedLM

HP = {
    "seed": 20240611,
    "threads": 2,
    "max_len": 48,            # subwords per sentence, [CLS] and [SEP] included
    "batch_sentences": 128,
    "steps": 6000,
    "warmup_steps": 300,
    "lr": 1e-3,
    "lr_schedule": "linear warm-up, then linear decay to 0",
    "weight_decay": 0.01,
    "betas": [0.9, 0.999],
    "eps": 1e-6,
    "grad_clip": 1.0,
    "mask_prob": 0.15,
    "mask_split": "80% [MASK] / 10% random token / 10% unchanged",
    "random_token_min_id": 999,   # random replacements avoid [PAD]/[unused*]/specials
    "dropout": 0.1,
    "eval_every": 500,
}


def load_tokenizer(path):
    from tokenizers import Tokenizer
    tok = Tokenizer.from_file(path)
    tok.no_padding()
    tok.no_truncation()
    return tok


def encode_corpus(tok, path, max_len):
    with open(path) as f:
        sents = [l for l in f.read().split("\n") if l]
    out = []
    for b in range(0, len(sents), 20000):
        for e in tok.encode_batch(sents[b:b + 20000]):
            ids = e.ids
            if len(ids) > max_len:
                ids = ids[:max_len - 1] + [ids[-1]]
            out.append(np.array(ids, dtype=np.int64))
    return out


def make_batch(rows, rng, vocab, cls_id, sep_id, mask_id, hp):
    L = max(len(r) for r in rows)
    x = np.zeros((len(rows), L), dtype=np.int64)
    a = np.zeros((len(rows), L), dtype=np.int64)
    for i, r in enumerate(rows):
        x[i, :len(r)] = r
        a[i, :len(r)] = 1
    cand = (a == 1) & (x != cls_id) & (x != sep_id)
    sel = (rng.random(x.shape) < hp["mask_prob"]) & cand
    # at least one prediction per row
    for i in range(len(rows)):
        if not sel[i].any():
            sel[i, rng.integers(1, len(rows[i]) - 1)] = True
    gold = x[sel]
    u = rng.random(gold.shape)
    inp = x.copy()
    vals = np.where(u < 0.8, mask_id,
                    np.where(u < 0.9, rng.integers(hp["random_token_min_id"], vocab, gold.shape),
                             gold))
    inp[sel] = vals
    return (torch.from_numpy(inp), torch.from_numpy(a), torch.from_numpy(sel),
            torch.from_numpy(gold))


def train(base_dir, tokenizer_path, corpus_dir, out_dir, steps=None, log=print):
    hp = dict(HP)
    if steps:
        hp["steps"] = steps
    torch.set_num_threads(hp["threads"])
    torch.manual_seed(hp["seed"])
    random.seed(hp["seed"])
    rng = np.random.default_rng(hp["seed"])

    tok = load_tokenizer(tokenizer_path)
    vocab = tok.get_vocab_size()
    cls_id, sep_id, mask_id = (tok.token_to_id(t) for t in ("[CLS]", "[SEP]", "[MASK]"))
    t0 = time.time()
    data = encode_corpus(tok, os.path.join(corpus_dir, "train.txt"), hp["max_len"])
    n_tok = int(sum(len(r) for r in data))
    log(f"[train] {len(data)} sentences, {n_tok} subwords (with [CLS]/[SEP]) "
        f"tokenized in {time.time() - t0:.1f}s")
    with open(os.path.join(corpus_dir, "heldout.txt")) as f:
        held = [l for l in f.read().split("\n") if l]
    items = ev.heldout_items(tok, held[:500])

    model = BertForMaskedLM.from_dir(base_dir)
    nparams = sum(p.numel() for p in model.parameters())
    log(f"[train] base model: {nparams} parameters")
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": hp["weight_decay"]},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=hp["lr"], betas=tuple(hp["betas"]), eps=hp["eps"])

    def lr_at(s):
        if s < hp["warmup_steps"]:
            return hp["lr"] * (s + 1) / hp["warmup_steps"]
        return hp["lr"] * max(0.0, (hp["steps"] - s) / (hp["steps"] - hp["warmup_steps"]))

    order = rng.permutation(len(data))
    cursor = 0
    epochs = 0
    t_train = time.time()
    run_loss = 0.0
    history = []
    for step in range(hp["steps"]):
        if cursor + hp["batch_sentences"] > len(order):
            order = rng.permutation(len(data))
            cursor = 0
            epochs += 1
        rows = [data[i] for i in order[cursor:cursor + hp["batch_sentences"]]]
        cursor += hp["batch_sentences"]
        x, a, sel, gold = make_batch(rows, rng, vocab, cls_id, sep_id, mask_id, hp)
        for g in opt.param_groups:
            g["lr"] = lr_at(step)
        model.train()
        h = model.hidden(x, a)
        logits = model.head(h[sel])
        loss = F.cross_entropy(logits, gold)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), hp["grad_clip"])
        opt.step()
        run_loss += loss.item()
        if (step + 1) % 100 == 0:
            el = time.time() - t_train
            log(f"[train] step {step + 1}/{hp['steps']} loss {run_loss / 100:.3f} "
                f"lr {lr_at(step):.2e} {el:.0f}s elapsed, "
                f"eta {el / (step + 1) * (hp['steps'] - step - 1):.0f}s")
            run_loss = 0.0
        if (step + 1) % hp["eval_every"] == 0 or step + 1 == hp["steps"]:
            model.eval()
            t1, t10 = ev.fill_mask(ev.torch_logits_fn(model), items, mask_id)
            history.append({"step": step + 1, "heldout500_top1": t1, "heldout500_top10": t10})
            log(f"[train] step {step + 1}: held-out (500) fill-mask top-1 {t1:.3f} "
                f"top-10 {t10:.3f}")
    wall = time.time() - t_train
    model.eval()
    model.save_dir(out_dir)
    info = {"hyperparameters": hp, "parameters": nparams, "train_sentences": len(data),
            "train_subwords": n_tok, "epochs_completed": epochs,
            "sentences_seen": hp["steps"] * hp["batch_sentences"],
            "train_wall_s": round(wall, 1), "history": history,
            "torch": torch.__version__, "torch_threads": torch.get_num_threads()}
    with open(os.path.join(out_dir, "train_info.json"), "w") as f:
        json.dump(info, f, indent=1)
    log(f"[train] done: {hp['steps']} steps in {wall:.0f}s; checkpoint in {out_dir}")
    return model, info
