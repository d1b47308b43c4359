"""Assemble the English training corpus for the small MLM from Debian text packages
plus sentences filled from templates (see templates.py).

Every source is a Debian package installed by scripts/build-mlm; the package, its
version and its licence are recorded in corpus_manifest.json and in the model card.
Output: <work>/corpus/train.txt and <work>/corpus/heldout.txt (one sentence a line).
"""
import glob
import gzip
import hashlib
import json
import os
import random
import re
import subprocess
import time

from . import templates

# package -> (licence as stated in /usr/share/doc/PKG/copyright, what is used)
SOURCES = {
    "wordnet-base": ("WordNet 3.0 licence (Princeton; permissive, BSD-like)",
                     "usage examples and noun/verb glosses from /usr/share/wordnet/data.*"),
    "dict-gcide": ("GPL-2+ (GNU Collaborative International Dictionary of English; "
                   "Webster's 1913 part public domain)",
                   "definitions and quotations from /usr/share/dictd/gcide.dict.dz"),
    "jargon-text": ("public domain (the Jargon File 4.4.7)",
                    "/usr/share/doc/jargon-text/jargon.txt.gz"),
    "dict-devil": ("public domain (Ambrose Bierce, The Devil's Dictionary)",
                   "/usr/share/dictd/devil.dict.dz"),
    "dict-foldoc": ("GFDL-1.1+ (Free On-line Dictionary of Computing)",
                    "/usr/share/dictd/foldoc.dict.dz"),
    "fortunes": ("BSD-3-Clause (fortune-mod data, University of California)",
                 "/usr/share/games/fortunes/* except art, ascii-art"),
    "fortunes-min": ("BSD-3-Clause (fortune-mod data, University of California)",
                     "/usr/share/games/fortunes/{fortunes,literature,riddles}"),
    "manpages": ("GPL-2+ / Linux-man-pages-copyleft and others (per page)",
                 "prose of the manual pages in the package, rendered by man(1)"),
}

# per-source caps (sentences), so that no single source dominates; sampled with the seed
CAPS = {
    "wordnet-base": 150_000,
    "dict-gcide": 170_000,
    "jargon-text": 40_000,
    "dict-devil": 20_000,
    "dict-foldoc": 40_000,
    "fortunes": 40_000,
    "manpages": 30_000,
    "templates": 110_000,
}

HELDOUT = 2000

QUOTES = str.maketrans({"\u201c": '"', "\u201d": '"', "\u2018": "'", "\u2019": "'",
                        "\u2014": " - ", "\u2013": "-", "\u00b7": "", "`": "'"})

SPLIT_RE = re.compile(r'(?<=[.!?])["\')\]]?\s+(?=["\'(\[]?[A-Z0-9])')
BAD_RE = re.compile(r"[{}|\\<>_=#*~^@]|\.\.\.|--|\[\w|http|www\.|\(\d{4}-\d\d-\d\d\)")


def pkg_version(pkg):
    return subprocess.run(["dpkg-query", "-W", "-f=${Version}", pkg], check=True,
                          capture_output=True, text=True).stdout.strip()


def clean(s):
    s = s.translate(QUOTES)
    s = re.sub(r"\s+", " ", s).strip()
    return s


def good(s, min_words=4, max_words=40):
    if BAD_RE.search(s):
        return False
    w = s.split()
    if not (min_words <= len(w) <= max_words):
        return False
    letters = sum(c.isalpha() for c in s)
    if letters < 0.7 * len(s.replace(" ", "")):
        return False
    if s.upper() == s:
        return False
    if not s[0].isupper() and not s[0] in "\"'(":
        return False
    if s[-1] not in ".!?\"'":
        return False
    if s.count('"') % 2 or s.count("(") != s.count(")"):
        return False
    return True


def sentences_of(text):
    """Split prose (paragraphs separated by blank lines) into sentences."""
    out = []
    for para in re.split(r"\n\s*\n", text):
        para = clean(para)
        if not para:
            continue
        for s in SPLIT_RE.split(para):
            s = s.strip()
            if good(s):
                out.append(s)
    return out


def src_wordnet():
    out = []
    for pos in ("noun", "verb", "adj", "adv"):
        with open(f"/usr/share/wordnet/data.{pos}", encoding="latin-1") as f:
            for line in f:
                if line.startswith("  ") or "|" not in line:
                    continue
                head, gloss = line.split("|", 1)
                fields = head.split()
                lemma = fields[4].replace("_", " ")
                parts = [p.strip() for p in gloss.strip().split(";")]
                defs = [p for p in parts if p and not p.startswith('"')]
                for p in parts:
                    if p.startswith('"'):
                        ex = clean(p.strip('"'))
                        if ex and ex[-1] not in ".!?":
                            ex += "."
                        if ex:
                            ex = ex[0].upper() + ex[1:]
                        if good(ex, min_words=3):
                            out.append(ex)
                if not defs or "(" in defs[0]:
                    continue
                d = clean(defs[0])
                if pos == "noun" and re.match(r"(a|an|the|any|one|someone|something|that)\b", d):
                    s = f"{lemma[0].upper() + lemma[1:]} is {d}."
                elif pos == "verb":
                    s = f"To {lemma} is to {d}."
                else:
                    continue
                if good(s):
                    out.append(s)
    return out


def dict_text(name):
    with gzip.open(f"/usr/share/dictd/{name}.dict.dz", "rt", encoding="utf-8",
                   errors="replace") as f:
        return f.read()


def src_gcide():
    t = dict_text("gcide")
    t = re.sub(r"^\s*\[[^\]\n]*\]\s*$", "", t, flags=re.M)      # [1913 Webster] etc.
    t = re.sub(r"--\s*[A-Z][\w. ]{0,40}\.?\s*$", "", t, flags=re.M)  # --Author.
    t = re.sub(r"\\[^\\\n]*\\", "", t)                            # \pro*nun"ci*a`tion\
    t = re.sub(r"\[[^\]]*\]", "", t)                              # [etymology]
    t = re.sub(r"[{}]", "", t)
    t = re.sub(r"^\s*\d+\.\s*", "", t, flags=re.M)                 # sense numbers
    t = re.sub(r"^\s*(Syn|Note):.*$", "", t, flags=re.M)
    return sentences_of(t)


def src_dict_generic(name):
    t = dict_text(name)
    t = re.sub(r"\{([^}]*)\}", r"\1", t)     # {cross references} -> plain words
    t = re.sub(r"<[^>]*>", "", t)            # <category> tags
    t = re.sub(r"^\s*\d+\.\s*", "", t, flags=re.M)
    return sentences_of(t)


def src_jargon():
    with gzip.open("/usr/share/doc/jargon-text/jargon.txt.gz", "rt", encoding="utf-8",
                   errors="replace") as f:
        t = f.read()
    t = re.sub(r"\{([^}]*)\}", r"\1", t)
    t = re.sub(r"^\s*:[^:\n]+:.*$", "", t, flags=re.M)   # :headword: /pron/, n.
    t = re.sub(r"^\s*\d+\.\s*", "", t, flags=re.M)
    return sentences_of(t)


def src_fortunes():
    out = []
    files = sorted(glob.glob("/usr/share/games/fortunes/*"))
    for fn in files:
        base = os.path.basename(fn)
        if "." in base or base in ("art", "ascii-art") or os.path.islink(fn) or not os.path.isfile(fn):
            continue
        with open(fn, encoding="utf-8", errors="replace") as f:
            t = f.read()
        for fort in re.split(r"^%\s*$", t, flags=re.M):
            fort = re.sub(r"^\s*--.*$", "", fort, flags=re.M)   # attribution lines
            out.extend(sentences_of(fort.replace("\n", " ")))
    return out


def src_manpages():
    pages = [p for p in subprocess.run(["dpkg", "-L", "manpages"], capture_output=True,
                                        text=True, check=True).stdout.split("\n")
             if "/man/man" in p and os.path.isfile(p)]
    out = []
    env = dict(os.environ, MANWIDTH="4000", LANG="C.UTF-8", MAN_KEEP_FORMATTING="")
    for p in sorted(pages):
        r = subprocess.run(["man", "-l", p], capture_output=True, text=True, env=env,
                           errors="replace")
        t = re.sub(r".\x08", "", r.stdout)
        # keep paragraphs of prose only (indented lines of body text)
        out.extend(s for s in sentences_of(t) if not re.search(r"\w\(\d\)|[/;]|\w\.\w", s))
    return out


def build(work, repo_root, seed=1234):
    t0 = time.time()
    rng = random.Random(seed)
    odir = os.path.join(work, "corpus")
    os.makedirs(odir, exist_ok=True)
    gens = {
        "wordnet-base": src_wordnet,
        "dict-gcide": src_gcide,
        "jargon-text": src_jargon,
        "dict-devil": lambda: src_dict_generic("devil"),
        "dict-foldoc": lambda: src_dict_generic("foldoc"),
        "fortunes": src_fortunes,
        "manpages": src_manpages,
    }
    per_source = {}
    seen = set()
    for name, fn in gens.items():
        t1 = time.time()
        sents = []
        for s in fn():
            k = s.lower()
            if k not in seen:
                seen.add(k)
                sents.append(s)
        n_all = len(sents)
        if len(sents) > CAPS[name]:
            sents = rng.sample(sents, CAPS[name])
        per_source[name] = sents
        print(f"[corpus] {name}: {n_all} unique sentences, kept {len(sents)} "
              f"({time.time() - t1:.1f}s)", flush=True)
    tpl, tpl_info = templates.generate(repo_root, CAPS["templates"], rng)
    per_source["templates"] = tpl
    print(f"[corpus] templates: {len(tpl)} sentences", flush=True)

    all_s = [(name, s) for name, ss in per_source.items() for s in ss]
    rng.shuffle(all_s)
    heldout = [s for _, s in all_s[:HELDOUT]]
    train = [s for _, s in all_s[HELDOUT:]]
    with open(os.path.join(odir, "train.txt"), "w") as f:
        f.write("\n".join(train) + "\n")
    with open(os.path.join(odir, "heldout.txt"), "w") as f:
        f.write("\n".join(heldout) + "\n")
    with open(os.path.join(odir, "heldout_sources.txt"), "w") as f:
        f.write("\n".join(name for name, _ in all_s[:HELDOUT]) + "\n")
    manifest = {
        "seed": seed,
        "sources": {name: {"package": name, "version": pkg_version(name),
                           "licence": SOURCES[name][0], "used": SOURCES[name][1],
                           "sentences": len(per_source[name])}
                    for name in gens},
        "templates": dict(tpl_info, sentences=len(tpl)),
        "train_sentences": len(train),
        "heldout_sentences": len(heldout),
        "heldout_by_source": {},
        "train_sha256": hashlib.sha256("\n".join(train).encode()).hexdigest(),
    }
    for name, _ in all_s[:HELDOUT]:
        manifest["heldout_by_source"][name] = manifest["heldout_by_source"].get(name, 0) + 1
    with open(os.path.join(odir, "corpus_manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)
    print(f"[corpus] train {len(train)} / held out {len(heldout)} sentences "
          f"in {time.time() - t0:.1f}s", flush=True)
    return manifest
